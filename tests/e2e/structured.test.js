// Constrained decoding end to end: random JSON schemas (a seeded generator, so every run asks the same ones) sent
// as response_format / json_schema; every answer must parse and validate with ajv. Also GBNF grammars, forced
// tool calls in both formats (Qwen3.5 XML, Hermes JSON), streamed and not, validated against their parameter
// schemas, unsupported schema features (400), llama-server's
// sampling fields, and a grammar with speculative decoding giving the same tokens as without.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import { fileURLToPath } from 'node:url';
import { startServer, postJson, FAKE } from './harness.js';

// Qwen3's template asks for Hermes JSON tool calls (<tool_call>{"name": ..., "arguments": ...}</tool_call>),
// the demo model's own (Qwen3.5) for XML ones.
const qwen3Template = fileURLToPath(new URL('../data/chat/qwen3.jinja', import.meta.url));

let srv, spec, hermes;
before(async () => {
  if (FAKE) return;  // the scripted fake engine does not sample
  srv = await startServer();
  spec = await startServer(['--spec', 'mtp,ngram', '--draft-max', '4']);
  hermes = await startServer(['--chat-template-file', qwen3Template]);
});
after(async () => {
  for (const s of [srv, spec, hermes]) if (s) await s.stop();
});

// mulberry32: a small deterministic PRNG.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A random schema of the supported kinds, every string and array bounded (so that even a random-weight model
// finishes its answer).
function randomSchema(r, depth = 0) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const kinds = depth >= 2 ? ['string', 'integer', 'number', 'boolean', 'null', 'enum']
    : ['object', 'object', 'array', 'string', 'integer', 'number', 'boolean', 'enum', 'anyOf', 'const'];
  switch (pick(kinds)) {
    case 'string': {
      const lo = Math.floor(r() * 3);
      return { type: 'string', minLength: lo, maxLength: lo + 1 + Math.floor(r() * 8) };
    }
    case 'integer': {
      const s = { type: 'integer' };
      if (r() < 0.7) s.minimum = Math.floor(r() * 200) - 100;
      if (r() < 0.7) s.maximum = (s.minimum ?? -100) + Math.floor(r() * 1000);
      if (r() < 0.2) s.exclusiveMaximum = (s.minimum ?? 0) + 5 + Math.floor(r() * 50);
      return s;
    }
    case 'number': return { type: 'number' };
    case 'boolean': return { type: 'boolean' };
    case 'null': return { type: 'null' };
    case 'const': return { const: pick(['x', 42, true, null, { a: [1, 2] }]) };
    case 'enum': return { enum: [pick(['red', 'green', 'blue']), pick([1, 2.5, false, null]), 'a"quote', 'ünï'] };
    case 'anyOf': return { anyOf: [randomSchema(r, depth + 1), randomSchema(r, depth + 1)] };
    case 'array': {
      const lo = Math.floor(r() * 2);
      return { type: 'array', items: randomSchema(r, depth + 1), minItems: lo, maxItems: lo + 1 + Math.floor(r() * 2) };
    }
    default: {
      const n = 1 + Math.floor(r() * 4);
      const properties = {};
      for (let i = 0; i < n; i++) properties[`p${i}_${pick(['id', 'name', 'v'])}`] = randomSchema(r, depth + 1);
      const keys = Object.keys(properties);
      const s = { type: 'object', properties, required: keys.filter(() => r() < 0.6) };
      if (r() < 0.5) s.additionalProperties = false;
      return s;
    }
  }
}

const ajv = new Ajv({ strict: false });
const noThinking = { chat_template_kwargs: { enable_thinking: false } };

async function chat(server, body) {
  return postJson(server.base, '/v1/chat/completions', {
    messages: [{ role: 'user', content: 'Answer in JSON.' }], max_tokens: 1500, ...noThinking, ...body,
  });
}

function assertValid(schema, text, what) {
  let value;
  try { value = JSON.parse(text); } catch (e) { assert.fail(`${what}: not JSON: ${text}`); }
  const ok = ajv.validate(schema, value);
  assert.ok(ok, `${what}: ${ajv.errorsText()}\nschema ${JSON.stringify(schema)}\noutput ${text}`);
}

test('answers to 40 random JSON schemas parse and validate', { skip: FAKE }, async () => {
  const r = rng(20261201);
  for (let i = 0; i < 40; i++) {
    let schema = randomSchema(r);
    if (i % 4 === 0) schema = { type: 'object', properties: { answer: schema }, required: ['answer'] };
    const body = i % 3 === 0
      ? { json_schema: schema, temperature: 1.0, seed: i }
      : { response_format: { type: 'json_schema', json_schema: { name: 'x', strict: true, schema } }, seed: i };
    const res = await chat(srv, body);
    assert.equal(res.status, 200, res.text);
    const c = res.json.choices[0];
    assert.equal(c.finish_reason, 'stop', `schema ${JSON.stringify(schema)}: ${c.message.content}`);
    assertValid(schema, c.message.content, `schema #${i}`);
  }
});

test('a schema with $defs references and nested objects validates', { skip: FAKE }, async () => {
  const schema = {
    $defs: { point: { type: 'object', properties: { x: { type: 'integer', minimum: 0, maximum: 9 }, y: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['x', 'y'], additionalProperties: false } },
    type: 'object',
    properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' }, label: { type: 'string', maxLength: 6 } },
    required: ['from', 'to'],
    additionalProperties: false,
  };
  for (let seed = 0; seed < 5; seed++) {
    const res = await chat(srv, { response_format: { type: 'json_schema', json_schema: { name: 'seg', schema } }, seed });
    assert.equal(res.status, 200, res.text);
    assertValid(schema, res.json.choices[0].message.content, `seed ${seed}`);
  }
});

test('json_object gives a JSON object, a GBNF grammar is followed', { skip: FAKE }, async () => {
  const res = await chat(srv, { response_format: { type: 'json_object' }, max_tokens: 60, seed: 3 });
  assert.equal(res.status, 200, res.text);
  const c = res.json.choices[0];
  // An unbounded object may run out of tokens on a random model; whatever came must be an object's prefix.
  assert.ok(c.message.content.startsWith('{'), c.message.content);
  if (c.finish_reason === 'stop') assert.equal(typeof JSON.parse(c.message.content), 'object');
  const g = await postJson(srv.base, '/v1/completions', {
    prompt: 'Colour:', max_tokens: 20, seed: 5, grammar: 'root ::= ("red" | "green" | "blue") " " [0-9]{1,3}',
  });
  assert.equal(g.status, 200, g.text);
  assert.match(g.json.choices[0].text, /^(red|green|blue) [0-9]{1,3}$/);
});

const weatherParameters = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 12 },
    days: { type: 'integer', minimum: 1, maximum: 7 },
    unit: { type: 'string', enum: ['C', 'F'] },
  },
  required: ['city', 'days'],
};
const forcedTools = [
  { type: 'function', function: { name: 'get_weather', parameters: weatherParameters } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string', maxLength: 5 } }, required: ['tz'] } } },
];
const forcedChoices = [['required', null], [{ type: 'function', function: { name: 'get_weather' } }, 'get_weather']];

function assertForcedCalls(calls, name, what) {
  assert.ok(calls.length >= 1, what);
  for (const call of calls) {
    if (name) assert.equal(call.function.name, name, what);
    const tool = forcedTools.find((t) => t.function.name === call.function.name);
    assert.ok(tool, `${what}: ${call.function.name}`);
    assertValid(tool.function.parameters, call.function.arguments, `${what}: ${call.function.name}`);
  }
}

// The streamed tool calls put together as OpenAI clients do: id, type and name in the first delta of each
// index, `arguments` appended.
async function streamedCalls(server, body) {
  const stream = await server.client.chat.completions.create({
    model: 'm', messages: [{ role: 'user', content: 'Answer in JSON.' }], max_tokens: 600, ...noThinking, ...body,
    stream: true,
  });
  const calls = [];
  let finish = null, content = '';
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      content += ch.delta?.content ?? '';
      for (const tc of ch.delta?.tool_calls ?? []) {
        if (!calls[tc.index]) calls[tc.index] = { id: tc.id, type: tc.type, function: { name: tc.function?.name, arguments: '' } };
        calls[tc.index].function.arguments += tc.function?.arguments ?? '';
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { calls, finish, content };
}

for (const [format, server] of [['Qwen3.5 XML', () => srv], ['Hermes JSON (Qwen3 template)', () => hermes]]) {
  test(`forced ${format} tool calls produce arguments that validate against the tool schema`, { skip: FAKE }, async () => {
    // The format the server constrains to follows the template's tool instructions.
    const t = await postJson(server().base, '/apply-template', { messages: [{ role: 'user', content: 'hi' }], tools: forcedTools });
    assert.equal(t.status, 200, t.text);
    assert.equal(t.json.prompt.includes('<function='), format.includes('XML'), t.json.prompt);
    for (const [choice, name] of forcedChoices) {
      for (let seed = 0; seed < 4; seed++) {
        const what = `${JSON.stringify(choice)} seed ${seed}`;
        const res = await chat(server(), { tools: forcedTools, tool_choice: choice, seed, max_tokens: 600 });
        assert.equal(res.status, 200, res.text);
        const c = res.json.choices[0];
        assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
        assertForcedCalls(c.message.tool_calls, name, what);
        // Streamed: the same calls, every one with an id, as the deltas put together.
        const s = await streamedCalls(server(), { tools: forcedTools, tool_choice: choice, seed });
        assert.equal(s.finish, 'tool_calls', what);
        assert.equal(s.content, '', what);
        for (const call of s.calls) assert.ok(call.id && call.type === 'function', what);
        assertForcedCalls(s.calls, name, `${what} streamed`);
        assert.deepEqual(s.calls.map((x) => [x.function.name, x.function.arguments]),
          c.message.tool_calls.map((x) => [x.function.name, x.function.arguments]), what);
      }
    }
  });
}

test('unsupported schema features and bad grammars are a 400 naming the problem', { skip: FAKE }, async () => {
  for (const [body, word] of [
    [{ response_format: { type: 'json_schema', json_schema: { schema: { type: 'string', pattern: '^a+$' } } } }, 'pattern'],
    [{ json_schema: { type: 'array', uniqueItems: true } }, 'uniqueItems'],
    [{ json_schema: { allOf: [{ type: 'object' }] } }, 'allOf'],
    [{ grammar: 'root ::= missing' }, 'missing'],
    [{ grammar: 'root ::= root "a"' }, 'left-recursive'],
  ]) {
    const res = await chat(srv, body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.ok(res.json.error.message.includes(word), res.json.error.message);
  }
});

test('llama-server sampling fields are accepted and change the sampling', { skip: FAKE }, async () => {
  const base = { prompt: 'Once upon a time', max_tokens: 24, seed: 11, temperature: 0.9 };
  const plain = await postJson(srv.base, '/v1/completions', base);
  assert.equal(plain.status, 200, plain.text);
  const again = await postJson(srv.base, '/v1/completions', base);
  assert.equal(again.json.choices[0].text, plain.json.choices[0].text, 'same seed, same text');
  for (const extra of [
    { presence_penalty: 1.5, frequency_penalty: 1.0, repeat_penalty: 1.3, repeat_last_n: 32 },
    { dry_multiplier: 0.8, dry_base: 1.75, dry_allowed_length: 2, dry_penalty_last_n: -1, dry_sequence_breakers: ['\n'] },
    { xtc_probability: 1.0, xtc_threshold: 0.05 },
    { typical_p: 0.5, top_n_sigma: 1.0 },
    { mirostat: 2, mirostat_tau: 3.0, mirostat_eta: 0.2 },
    { samplers: ['min_p', 'temperature'], min_p: 0.2 },
    { logit_bias: { 'Once': -100 }, n_probs: 2 },
  ]) {
    const res = await postJson(srv.base, '/v1/completions', { ...base, ...extra });
    assert.equal(res.status, 200, `${JSON.stringify(extra)}: ${res.text}`);
  }
  // Banning the greedy token changes the greedy answer.
  const greedy = await postJson(srv.base, '/v1/completions', { prompt: 'Once upon a time', max_tokens: 1, temperature: 0, logprobs: 1 });
  const top = greedy.json.choices[0].logprobs.tokens[0];
  const tok = await postJson(srv.base, '/tokenize', { content: top });
  const banned = await postJson(srv.base, '/v1/completions', {
    prompt: 'Once upon a time', max_tokens: 1, temperature: 0, logit_bias: [[tok.json.tokens[0], false]],
  });
  assert.notEqual(banned.json.choices[0].text, greedy.json.choices[0].text);
});

test('a grammar-constrained answer is the same with and without speculative decoding', { skip: FAKE }, async () => {
  const schema = { type: 'object', properties: { a: { type: 'string', maxLength: 20 }, b: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 999 }, maxItems: 6 } }, required: ['a', 'b'] };
  for (const temperature of [0, 0.8]) {
    const body = { json_schema: schema, temperature, seed: 7, logprobs: true, top_logprobs: 2 };
    const a = await chat(srv, body);
    const b = await chat(spec, body);
    assert.equal(a.status, 200, a.text);
    assert.equal(b.status, 200, b.text);
    if (temperature === 0) {
      assert.equal(b.json.choices[0].message.content, a.json.choices[0].message.content);
      assert.deepEqual(b.json.choices[0].logprobs, a.json.choices[0].logprobs);
    }
    assertValid(schema, b.json.choices[0].message.content, `speculative, temperature ${temperature}`);
  }
});
