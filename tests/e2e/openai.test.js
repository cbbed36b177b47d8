// `rewind serve` through the official openai client: chat (plain, streaming, tools, logprobs), completions,
// errors, concurrency, client disconnects, and the llama-server endpoints replay.py relies on.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson, FAKE } from './harness.js';

let srv;
before(async () => { srv = await startServer(); });
after(async () => { if (srv) await srv.stop(); });

const user = (text) => [{ role: 'user', content: text }];
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];

async function collect(stream) {
  const out = { chunks: [], content: '', reasoning: '', finish: null, usage: null, timings: null, toolCalls: [] };
  for await (const chunk of stream) {
    out.chunks.push(chunk);
    if (chunk.usage) out.usage = chunk.usage;
    if (chunk.timings) out.timings = chunk.timings;
    for (const ch of chunk.choices) {
      out.content += ch.delta?.content ?? '';
      out.reasoning += ch.delta?.reasoning_content ?? '';
      for (const tc of ch.delta?.tool_calls ?? []) out.toolCalls.push(tc);
      if (ch.finish_reason) out.finish = ch.finish_reason;
    }
  }
  return out;
}

test('plain chat returns an assistant message with usage, timings and a cache report', async () => {
  const r = await srv.client.chat.completions.create({ model: 'any-name', messages: user('Say hello.'), max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  const m = r.choices[0].message;
  assert.equal(m.role, 'assistant');
  assert.ok(typeof m.content === 'string' || m.content === null);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
  for (const k of ['prompt_n', 'prompt_ms', 'predicted_n', 'predicted_ms', 'cache_n', 'prompt_per_second', 'predicted_per_second']) {
    assert.equal(typeof r.timings[k], 'number', k);
  }
  assert.equal(r.timings.cache_n + r.timings.prompt_n <= r.usage.prompt_tokens, true);
  for (const k of ['lcp', 'resume_pos', 'source', 'extra_tokens', 'reason']) assert.ok(k in r.cache, k);
});

test('streaming chat equals the non-streaming answer at temperature 0 and ends with usage', async () => {
  const body = { model: 'm', messages: user('Count to five.'), max_tokens: 12, temperature: 0 };
  const plain = await srv.client.chat.completions.create(body);
  const s = await collect(await srv.client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }));
  assert.equal(s.chunks[0].choices[0].delta.role, 'assistant');
  assert.equal(s.content, plain.choices[0].message.content ?? '');
  assert.equal(s.reasoning, plain.choices[0].message.reasoning_content ?? '');
  assert.equal(s.finish, plain.choices[0].finish_reason);
  assert.ok(s.usage, 'usage chunk');
  assert.equal(s.usage.completion_tokens, plain.usage.completion_tokens);
  assert.equal(s.usage.prompt_tokens, plain.usage.prompt_tokens);
  assert.equal(s.chunks.at(-1).choices.length, 0);
  assert.ok(s.timings && typeof s.timings.prompt_n === 'number' && typeof s.timings.cache_n === 'number');
  // The same prompt again: the engine reuses at least part of it.
  assert.ok(s.usage.prompt_tokens_details.cached_tokens > 0 || s.timings.cache_n > 0);
});

test('thinking can be switched off with chat_template_kwargs', async () => {
  const r = await srv.client.chat.completions.create({
    model: 'm', messages: user('Hi'), max_tokens: 6, temperature: 0, chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(r.choices[0].message.reasoning_content, undefined);
});

test('tools are accepted and tool calls come back in OpenAI form', async () => {
  const r = await srv.client.chat.completions.create({
    model: 'm', messages: user('CALL_TOOL: what is the weather in Paris?'), tools, tool_choice: 'auto', max_tokens: 200, temperature: 0,
  });
  const choice = r.choices[0];
  const calls = choice.message.tool_calls ?? [];
  if (FAKE) assert.equal(calls.length, 1);
  for (const c of calls) {
    assert.equal(c.type, 'function');
    assert.ok(c.id);
    assert.equal(c.function.name, 'get_weather');
    assert.equal(typeof JSON.parse(c.function.arguments), 'object');
  }
  assert.equal(choice.finish_reason === 'tool_calls', calls.length > 0);
  // A follow-up turn with the tool result is accepted.
  const follow = await srv.client.chat.completions.create({
    model: 'm', tools, max_tokens: 4, temperature: 0,
    messages: [...user('Weather in Paris?'),
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 21}' }],
  });
  assert.equal(follow.choices[0].message.role, 'assistant');
  const streamed = await collect(await srv.client.chat.completions.create({
    model: 'm', messages: user('CALL_TOOL now'), tools, max_tokens: 200, temperature: 0, stream: true,
  }));
  // Streamed as OpenAI streams them: a first delta per call with id and name, then argument pieces.
  const calls2 = [];
  for (const tc of streamed.toolCalls) {
    if (tc.function?.name) {
      assert.equal(tc.index, calls2.length);
      assert.ok(tc.id);
      calls2.push({ name: tc.function.name, args: tc.function.arguments ?? '' });
    } else {
      calls2[tc.index].args += tc.function?.arguments ?? '';
    }
  }
  if (FAKE) assert.equal(calls2.length, 1);
  for (const c of calls2) {
    assert.equal(c.name, 'get_weather');
    assert.equal(typeof JSON.parse(c.args), 'object');
  }
});

test('parallel tool calls stream with their own indices and the SDK accumulates them', async () => {
  if (!FAKE) return;  // needs a model that calls tools
  const stream = srv.client.beta.chat.completions.stream({
    model: 'm', messages: user('CALL_TOOLS_PARALLEL'), tools, max_tokens: 200, temperature: 0,
  });
  const final = await stream.finalChatCompletion();
  const calls = final.choices[0].message.tool_calls;
  assert.deepEqual(calls.map((c) => JSON.parse(c.function.arguments).city), ['Paris', 'Rome']);
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
});

test('reasoning_format none leaves the thoughts in the content', async () => {
  const r = await postJson(srv.base, '/v1/chat/completions', {
    messages: user('Hi'), max_tokens: 40, temperature: 0, reasoning_format: 'none',
  });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.choices[0].message.reasoning_content, undefined);
  if (FAKE) assert.match(r.json.choices[0].message.content, /Let me think about it\.<\/think>/);
});

// llama-server's deepseek-legacy: the thoughts in reasoning_content and, as <think>...</think>, in the content.
test('reasoning_format deepseek-legacy keeps the think block in the content as well', { skip: FAKE }, async () => {
  const body = { model: 'm', messages: user('Hi'), max_tokens: 40, temperature: 0, seed: 1 };
  const split = (await srv.client.chat.completions.create(body)).choices[0].message;
  const legacy = (await srv.client.chat.completions.create({ ...body, reasoning_format: 'deepseek-legacy' })).choices[0].message;
  const reasoning = split.reasoning_content;
  assert.ok(reasoning, 'the demo template thinks by default');
  assert.equal(legacy.reasoning_content, reasoning);
  // "</think>" only when the model closed its thoughts within max_tokens.
  const closed = legacy.content.startsWith(`<think>${reasoning}</think>`);
  assert.equal(legacy.content, closed ? `<think>${reasoning}</think>${split.content ?? ''}` : `<think>${reasoning}`);
  const s = await collect(await srv.client.chat.completions.create({ ...body, reasoning_format: 'deepseek-legacy', stream: true }));
  assert.equal(s.content, legacy.content);
  assert.equal(s.reasoning, reasoning);
});

test('logprobs list every generated token with sorted alternatives', async () => {
  const r = await srv.client.chat.completions.create({
    model: 'm', messages: user('Hi'), max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const t of lp) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0);
    assert.ok(Array.isArray(t.bytes));
    assert.equal(t.top_logprobs.length, 3);
    for (let i = 1; i < 3; i++) assert.ok(t.top_logprobs[i - 1].logprob >= t.top_logprobs[i].logprob);
    // Greedy: the chosen token is the most likely one.
    assert.equal(t.logprob, t.top_logprobs[0].logprob);
  }
});

test('text completions work with the legacy endpoint', async () => {
  const r = await srv.client.completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: 5, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.usage.completion_tokens > 0);
});

test('bad requests get 4xx JSON errors and the server keeps serving', async () => {
  const msgs = user('hi');
  const cases = [
    ['malformed JSON', '/v1/chat/completions', '{"messages": [', true],
    ['not an object', '/v1/chat/completions', '[]', true],
    ['invalid UTF-8', '/v1/chat/completions', Buffer.from('{"messages":[{"role":"user","content":"\xc3\x28"}]}', 'latin1'), true],
    ['no messages', '/v1/chat/completions', {}],
    ['empty messages', '/v1/chat/completions', { messages: [] }],
    ['content wrong type', '/v1/chat/completions', { messages: [{ role: 'user', content: 42 }] }],
    ['unknown role', '/v1/chat/completions', { messages: [{ role: 'wizard', content: 'x' }] }],
    ['negative max_tokens', '/v1/chat/completions', { messages: msgs, max_tokens: -3 }],
    ['top_p > 1', '/v1/chat/completions', { messages: msgs, top_p: 1.5 }],
    ['temperature < 0', '/v1/chat/completions', { messages: msgs, temperature: -0.5 }],
    ['n > 1', '/v1/chat/completions', { messages: msgs, n: 2 }],
    ['stream not a bool', '/v1/chat/completions', { messages: msgs, stream: 'yes' }],
    ['bad tools', '/v1/chat/completions', { messages: msgs, tools: 'get_weather' }],
    ['prompt longer than the context', '/v1/completions', { prompt: 'word '.repeat(70000), max_tokens: 1 }],
    ['no user message (template error)', '/v1/chat/completions',
      { messages: [{ role: 'system', content: 'b' }], ...(FAKE ? { messages: user('RAISE_EXCEPTION') } : {}) }],
    ['completion without prompt', '/v1/completions', {}],
    ['token outside the vocabulary', '/v1/completions', { prompt: [1, 99999999] }],
    ['tokenize without content', '/tokenize', {}],
    ['bad slot action', '/slots/0?action=explode', {}],
  ];
  for (const [name, path, body, raw] of cases) {
    const r = await postJson(srv.base, path, body, raw);
    assert.ok(r.status >= 400 && r.status < 500, `${name}: status ${r.status} ${r.text.slice(0, 200)}`);
    assert.ok(r.json && r.json.error && typeof r.json.error.message === 'string' && r.json.error.message.length > 0,
      `${name}: ${r.text.slice(0, 200)}`);
  }
  const get = await fetch(`${srv.base}/v1/chat/completions`);
  assert.equal(get.status, 405);
  const missing = await fetch(`${srv.base}/v1/nothing-here`);
  assert.equal(missing.status, 404);
  // The SDK surfaces them as APIError with the status.
  await assert.rejects(srv.client.chat.completions.create({ model: 'm', messages: [] }), (e) => e.status === 400);
  const ok = await srv.client.chat.completions.create({ model: 'm', messages: user('still there?'), max_tokens: 3 });
  assert.ok(ok.choices[0].message);
});

test('eight concurrent streaming clients all finish', async () => {
  const runs = Array.from({ length: 8 }, (_, i) => srv.client.chat.completions
    .create({ model: 'm', messages: user(`Client ${i}: tell me a story.`), max_tokens: 16, temperature: 0.7, seed: i, stream: true, stream_options: { include_usage: true } })
    .then(collect));
  const results = await Promise.all(runs);
  for (const r of results) {
    assert.ok(r.finish, 'finish_reason');
    assert.ok(r.usage && r.usage.completion_tokens > 0);
  }
});

test('a client that disconnects mid-stream cancels its request; the next request is served', async () => {
  const metric = async () => {
    const text = await (await fetch(`${srv.base}/metrics`)).text();
    const m = text.match(/^rewind_server_client_disconnects_total (\S+)$/m);
    return m ? Number(m[1]) : 0;
  };
  const before = await metric();
  const stream = await srv.client.chat.completions.create({
    model: 'm', messages: user('LONG: write forever.'), max_tokens: 4000, temperature: 0.8, stream: true, ignore_eos: true,
  });
  let n = 0;
  for await (const chunk of stream) {
    if (chunk.choices.length && ++n >= 3) break;  // leaving the loop aborts the HTTP request
  }
  let after = before;
  for (let i = 0; i < 100 && after <= before; i++) {
    await new Promise((r) => setTimeout(r, 100));
    after = await metric();
  }
  assert.ok(after > before, 'the server saw the disconnect');
  const ok = await srv.client.chat.completions.create({ model: 'm', messages: user('Hello again'), max_tokens: 3 });
  assert.ok(ok.usage.completion_tokens > 0);
});

test('/metrics is Prometheus text', async () => {
  const r = await fetch(`${srv.base}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/plain/);
  const text = await r.text();
  const sample = /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*\})? (-?[0-9.]+([eE][-+]?[0-9]+)?|[-+]?Inf|NaN)( [0-9]+)?$/;
  const comment = /^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]*( .*)?$/;
  let samples = 0;
  for (const line of text.split('\n')) {
    if (!line) continue;
    assert.ok(sample.test(line) || comment.test(line), `bad line: ${line}`);
    if (!line.startsWith('#')) samples++;
  }
  assert.ok(samples > 5);
  assert.match(text, /rewind_server_http_requests_total\{route="\/v1\/chat\/completions",status="200"\} \d+/);
});

test('/apply-template + /tokenize give the prompt the chat endpoint evaluates (replay.py)', async () => {
  const messages = [{ role: 'system', content: 'You are terse.' }, ...user('What is 2+2?')];
  const tpl = await postJson(srv.base, '/apply-template', { messages });
  assert.equal(tpl.status, 200);
  assert.equal(typeof tpl.json.prompt, 'string');
  const tok = await postJson(srv.base, '/tokenize', { content: tpl.json.prompt, add_special: true, parse_special: true });
  assert.equal(tok.status, 200);
  assert.ok(tok.json.tokens.length > 0 && tok.json.tokens.every(Number.isInteger));
  const chat = await srv.client.chat.completions.create({ model: 'm', messages, max_tokens: 2, temperature: 0 });
  assert.equal(chat.usage.prompt_tokens, tok.json.tokens.length);
  const pieces = await postJson(srv.base, '/tokenize', { content: 'Hello world', with_pieces: true });
  for (const p of pieces.json.tokens) {
    assert.ok(Number.isInteger(p.id));
    assert.ok(typeof p.piece === 'string' || Array.isArray(p.piece));
  }
  const detok = await postJson(srv.base, '/detokenize', { tokens: tok.json.tokens });
  assert.equal(detok.json.content, tpl.json.prompt);
});

test('models, health, slots and cache answer in llama-server shapes', async () => {
  const models = await srv.client.models.list();
  assert.ok(models.data.length === 1 && typeof models.data[0].id === 'string');
  assert.equal((await fetch(`${srv.base}/health`)).status, 200);
  const slots = await (await fetch(`${srv.base}/slots`)).json();
  assert.ok(Array.isArray(slots) && slots.length > 0);
  for (const s of slots) assert.ok(Number.isInteger(s.id) && typeof s.is_processing === 'boolean');
  const erase = await postJson(srv.base, '/slots/0?action=erase', {});
  assert.equal(erase.status, 200, erase.text);
  assert.equal(erase.json.id_slot, 0);
  const cache = await fetch(`${srv.base}/cache`);
  assert.equal(cache.status, 200);
  assert.equal(typeof (await cache.json()), 'object');
});
