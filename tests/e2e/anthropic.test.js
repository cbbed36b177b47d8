// `rewind serve` through the official @anthropic-ai/sdk client: Messages (plain, streaming, tools, thinking),
// count_tokens, errors, prompt caching reported as cache_read_input_tokens, and the same answer as the OpenAI
// endpoint for the same conversation (one engine, one cache).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, FAKE } from './harness.js';

let srv;
before(async () => { srv = await startServer(); });
after(async () => { if (srv) await srv.stop(); });

const tools = [{
  name: 'get_weather',
  description: 'Current weather of a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

test('messages.create returns content blocks, a stop_reason and usage', async () => {
  const m = await srv.anthropic.messages.create({
    model: 'claude-any', max_tokens: FAKE ? 64 : 12, temperature: 0, messages: [{ role: 'user', content: 'Say hello.' }],
  });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.ok(m.id.startsWith('msg_'));
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
  assert.ok(Array.isArray(m.content));
  for (const b of m.content) assert.ok(['text', 'thinking'].includes(b.type));
  assert.ok(m.usage.input_tokens > 0);
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= (FAKE ? 64 : 12));
  assert.equal(typeof m.usage.cache_read_input_tokens, 'number');
  if (FAKE) assert.equal(m.content.find((b) => b.type === 'text').text, 'Hello from the fake engine.');
});

test('the same conversation gives the same answer through the Anthropic and OpenAI endpoints', async () => {
  const system = 'You are terse.';
  const text = 'Name three colours.';
  const a = await srv.anthropic.messages.create({
    model: 'm', max_tokens: 16, temperature: 0, system, messages: [{ role: 'user', content: text }],
  });
  const o = await srv.client.chat.completions.create({
    model: 'm', max_tokens: 16, temperature: 0,
    messages: [{ role: 'system', content: system }, { role: 'user', content: text }],
  });
  const aText = a.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  const aThinking = a.content.filter((b) => b.type === 'thinking').map((b) => b.thinking).join('');
  assert.equal(aText, o.choices[0].message.content ?? '');
  assert.equal(aThinking, o.choices[0].message.reasoning_content ?? '');
  assert.equal(a.usage.output_tokens, o.usage.completion_tokens);
  // The second request found the first one's prompt in the cache.
  assert.equal(a.usage.input_tokens + a.usage.cache_read_input_tokens, o.usage.prompt_tokens);
  assert.ok(o.usage.prompt_tokens_details.cached_tokens > 0);
});

test('streaming emits message_start ... message_stop and equals the plain answer', async () => {
  const body = { model: 'm', max_tokens: 16, temperature: 0, messages: [{ role: 'user', content: 'Count to five.' }] };
  const plain = await srv.anthropic.messages.create(body);
  const stream = srv.anthropic.messages.stream(body);
  const types = [];
  stream.on('streamEvent', (e) => types.push(e.type));
  const final = await stream.finalMessage();
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.ok(types.includes('message_delta'));
  assert.deepEqual(final.content.map((b) => b.type), plain.content.map((b) => b.type));
  for (let i = 0; i < final.content.length; i++) {
    assert.equal(final.content[i].text ?? final.content[i].thinking, plain.content[i].text ?? plain.content[i].thinking);
  }
  assert.equal(final.stop_reason, plain.stop_reason);
  assert.equal(final.usage.output_tokens, plain.usage.output_tokens);
  assert.ok(final.usage.cache_read_input_tokens > 0, 'the same prompt again is read from the cache');
});

test('tools: tool_use blocks (plain and streamed) and a tool_result turn', async () => {
  const ask = { model: 'm', max_tokens: 200, temperature: 0, tools, messages: [{ role: 'user', content: 'CALL_TOOL: weather in Paris?' }] };
  const m = await srv.anthropic.messages.create(ask);
  const uses = m.content.filter((b) => b.type === 'tool_use');
  if (FAKE) {
    assert.equal(m.stop_reason, 'tool_use');
    assert.equal(uses.length, 1);
    assert.deepEqual(uses[0].input, { city: 'Paris' });
  }
  for (const u of uses) {
    assert.ok(u.id.startsWith('toolu_'));
    assert.equal(u.name, 'get_weather');
    assert.equal(typeof u.input, 'object');
  }
  assert.equal(m.stop_reason === 'tool_use', uses.length > 0);
  // Streamed: the SDK assembles the input from input_json_delta pieces.
  const streamed = await srv.anthropic.messages.stream({ ...ask, messages: [{ role: 'user', content: 'CALL_TOOLS_PARALLEL' }] }).finalMessage();
  if (FAKE) assert.deepEqual(streamed.content.filter((b) => b.type === 'tool_use').map((b) => b.input.city), ['Paris', 'Rome']);
  const follow = await srv.anthropic.messages.create({
    model: 'm', max_tokens: 8, temperature: 0, tools,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: '21C, sunny' }] }] },
    ],
  });
  assert.equal(follow.role, 'assistant');
});

test('thinking blocks follow the thinking parameter and go back as history', async () => {
  const on = await srv.anthropic.messages.create({
    model: 'm', max_tokens: 40, temperature: 0, thinking: { type: 'enabled', budget_tokens: 1024 },
    messages: [{ role: 'user', content: 'Hi' }],
  });
  const off = await srv.anthropic.messages.create({
    model: 'm', max_tokens: 40, temperature: 0, thinking: { type: 'disabled' },
    messages: [{ role: 'user', content: 'Hi' }],
  });
  assert.equal(off.content.filter((b) => b.type === 'thinking').length, 0);
  if (FAKE) assert.equal(on.content[0].type, 'thinking');
  const next = await srv.anthropic.messages.create({
    model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: on.content },
      { role: 'user', content: 'And again?' }],
  });
  assert.equal(next.type, 'message');
});

test('count_tokens counts the prompt the endpoint evaluates', async () => {
  const params = { model: 'm', system: 'You are terse.', messages: [{ role: 'user', content: 'What is 2+2?' }] };
  const count = await srv.anthropic.messages.countTokens(params);
  assert.ok(count.input_tokens > 0);
  const m = await srv.anthropic.messages.create({ ...params, max_tokens: 2, temperature: 0 });
  assert.equal(count.input_tokens, m.usage.input_tokens + m.usage.cache_read_input_tokens);
});

test('cache_control breakpoints are accepted on system, tools and messages', async () => {
  const params = {
    model: 'm', max_tokens: 2, temperature: 0,
    system: [{ type: 'text', text: 'Long project instructions.', cache_control: { type: 'ephemeral' } }],
    tools: [{ ...tools[0], cache_control: { type: 'ephemeral' } }],
    messages: [{ role: 'user', content: [{ type: 'text', text: 'First question.', cache_control: { type: 'ephemeral' } }] }],
  };
  await srv.anthropic.messages.create(params);
  const again = await srv.anthropic.messages.create({
    ...params, messages: [...params.messages, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'Second.' }],
  });
  assert.ok(again.usage.cache_read_input_tokens > 0);
});

test('errors come back in Anthropic shape and the SDK raises typed errors', async () => {
  await assert.rejects(
    srv.anthropic.messages.create({ model: 'm', max_tokens: 5, messages: [] }),
    (e) => e instanceof Anthropic.BadRequestError && e.status === 400 && e.error?.type === 'error');
  const r = await fetch(`${srv.base}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"messages":' });
  assert.equal(r.status, 400);
  const j = await r.json();
  assert.equal(j.type, 'error');
  assert.equal(j.error.type, 'invalid_request_error');
});
