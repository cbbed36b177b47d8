// `rewind serve` through the official openai client's Responses API (plain, streaming, function tools,
// previous_response_id), and llama-server's own endpoints browser clients use (/completion, /props, CORS).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson, FAKE } from './harness.js';

let srv;
before(async () => { srv = await startServer(); });
after(async () => { if (srv) await srv.stop(); });

const tools = [{
  type: 'function', name: 'get_weather', description: 'Current weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

test('responses.create answers with output items, output_text and usage', async () => {
  const r = await srv.client.responses.create({ model: 'm', input: 'Say hello.', instructions: 'Be brief.', max_output_tokens: FAKE ? 64 : 12, temperature: 0 });
  assert.equal(r.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(r.status));
  assert.equal(r.status === 'incomplete', r.incomplete_details?.reason === 'max_output_tokens');
  assert.equal(typeof r.output_text, 'string');
  for (const item of r.output) assert.ok(['message', 'reasoning'].includes(item.type));
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  if (FAKE) assert.equal(r.output_text, 'Hello from the fake engine.');
});

test('a streamed response has the events and text of the plain one', async () => {
  const body = { model: 'm', input: [{ role: 'user', content: [{ type: 'input_text', text: 'Count to five.' }] }], max_output_tokens: 16, temperature: 0 };
  const plain = await srv.client.responses.create(body);
  const stream = await srv.client.responses.create({ ...body, stream: true });
  const types = [];
  let text = '';
  let final = null;
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
  }
  assert.equal(types[0], 'response.created');
  assert.ok(final, 'a final response event');
  assert.equal(text, plain.output_text);
  assert.equal(final.usage.output_tokens, plain.usage.output_tokens);
  assert.ok(final.usage.input_tokens_details.cached_tokens > 0, 'the same prompt again is read from the cache');
});

test('function tools, function_call_output and previous_response_id', async () => {
  const first = await srv.client.responses.create({ model: 'm', input: 'CALL_TOOL: weather in Paris?', tools, max_output_tokens: 200, temperature: 0 });
  const calls = first.output.filter((i) => i.type === 'function_call');
  if (FAKE) {
    assert.equal(calls.length, 1);
    assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Paris' });
  }
  for (const c of calls) {
    assert.equal(c.name, 'get_weather');
    assert.ok(c.call_id);
  }
  const next = await srv.client.responses.create({
    model: 'm', previous_response_id: first.id, tools, max_output_tokens: 8, temperature: 0,
    input: calls.length ? [{ type: 'function_call_output', call_id: calls[0].call_id, output: '21C, sunny' }] : 'And tomorrow?',
  });
  assert.equal(next.previous_response_id, first.id);
  // The continued conversation starts with the stored one: its prefix comes from the cache.
  assert.ok(next.usage.input_tokens_details.cached_tokens > 0);
  // The whole history can also be sent explicitly.
  const explicit = await srv.client.responses.create({
    model: 'm', tools, max_output_tokens: 4,
    input: [{ role: 'user', content: 'Weather?' },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output', call_id: 'call_1', output: '21C' }],
  });
  assert.equal(explicit.object, 'response');
  await assert.rejects(srv.client.responses.create({ model: 'm', previous_response_id: 'resp_unknown', input: 'x' }), (e) => e.status === 404);
});

test('llama-server /completion takes text or tokens and streams its own shape', async () => {
  const r = await postJson(srv.base, '/completion', { prompt: 'Once upon a time', n_predict: 4, cache_prompt: true });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.stop, true);
  assert.equal(typeof r.json.content, 'string');
  assert.equal(r.json.tokens_predicted, 4);
  const tok = await postJson(srv.base, '/tokenize', { content: 'Once upon a time' });
  const s = await fetch(`${srv.base}/completion`, { method: 'POST', body: JSON.stringify({ prompt: tok.json.tokens, n_predict: 3, stream: true }) });
  const events = (await s.text()).split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => JSON.parse(e.slice(6)));
  assert.equal(events.at(-1).stop, true);
  assert.ok(events.slice(0, -1).every((e) => e.stop === false));
});

test('/props and CORS for browser clients', async () => {
  const props = await (await fetch(`${srv.base}/props`)).json();
  assert.ok(props.total_slots > 0);
  assert.ok(props.default_generation_settings.n_ctx > 0);
  const pre = await fetch(`${srv.base}/v1/chat/completions`, {
    method: 'OPTIONS', headers: { Origin: 'http://localhost:3000', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type' },
  });
  assert.ok(pre.status === 204 || pre.status === 200);
  assert.equal(pre.headers.get('access-control-allow-origin'), 'http://localhost:3000');
  const r = await fetch(`${srv.base}/v1/models`, { headers: { Origin: 'http://localhost:3000' } });
  assert.equal(r.headers.get('access-control-allow-origin'), 'http://localhost:3000');
});
