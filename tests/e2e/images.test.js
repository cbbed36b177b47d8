// Images through the official openai and @anthropic-ai/sdk clients (docs/images.md): `rewind serve` with the tiny
// qwen35 fixture and its tiny random mmproj (tests/data/golden_images). data: URI and base64 images are answered,
// a repeated image is served from the caches (the second question about it reuses the prompt up to the image's
// end), broken images and remote URLs get a 400 and the server keeps serving, and a server without --mmproj
// refuses images.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { startServer, postJson, FAKE } from './harness.js';

const data = join(dirname(fileURLToPath(import.meta.url)), '..', 'data');
const model = join(data, 'golden', 'models', 'tiny-qwen35-f32.gguf');
const mmproj = join(data, 'golden_images', 'tiny-mmproj-f32.gguf');
const png = readFileSync(join(data, 'golden_images', 'tall-64x160.png')).toString('base64');
const jpeg = readFileSync(join(data, 'golden_images', 'wide-200x64.jpg')).toString('base64');

let srv;
before(async () => { if (!FAKE) srv = await startServer(['-m', model, '--mmproj', mmproj, '--checkpoint-every', '0']); });
after(async () => { if (srv) await srv.stop(); });

const skip = FAKE ? 'the fake engine has no vision tower' : false;

function ask(question, b64 = png, type = 'image/png') {
  return srv.client.chat.completions.create({
    model: 'm', max_tokens: 4, temperature: 0,
    messages: [{ role: 'user', content: [
      { type: 'image_url', image_url: { url: `data:${type};base64,${b64}` } },
      { type: 'text', text: question },
    ] }],
  });
}

test('an OpenAI image_url part is answered, and a new question about it reuses the prompt past the image', { skip }, async () => {
  const a = await ask('What is in this picture?');
  assert.equal(a.choices[0].message.role, 'assistant');
  // 64x160 px -> 2 x 5 = 10 image tokens plus the text.
  assert.ok(a.usage.prompt_tokens > 10, JSON.stringify(a.usage));
  const b = await ask('How many colours are there?');
  const cached = b.usage.prompt_tokens_details?.cached_tokens ?? 0;
  // Everything up to just after <|vision_end|> is reused: the user header, the image and its markers.
  assert.ok(cached >= 13, JSON.stringify(b.usage) + '\n' + srv.log().slice(-3000));
  assert.ok(b.usage.prompt_tokens - cached <= 12 + 16, JSON.stringify(b.usage));
});

test('the same request gives the same answer and logprobs twice (cold, then from the cache)', { skip }, async () => {
  const req = {
    model: 'm', max_tokens: 6, temperature: 0, logprobs: true,
    messages: [{ role: 'user', content: [
      { type: 'text', text: 'Describe' }, { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${jpeg}` } }] }],
  };
  const a = await srv.client.chat.completions.create(req);
  const b = await srv.client.chat.completions.create(req);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.deepEqual(a.choices[0].logprobs.content.map((t) => t.logprob), b.choices[0].logprobs.content.map((t) => t.logprob));
});

test('an Anthropic base64 image block is answered and reads the cache the second time', { skip }, async () => {
  const msg = (q) => srv.anthropic.messages.create({
    model: 'm', max_tokens: 4, temperature: 0,
    messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
      { type: 'text', text: q },
    ] }],
  });
  const a = await msg('What shape?');
  assert.equal(a.type, 'message');
  const b = await msg('What colour?');
  assert.ok(b.usage.cache_read_input_tokens >= 13, JSON.stringify(b.usage));
});

test('a Responses input_image is answered', { skip }, async () => {
  const r = await srv.client.responses.create({
    model: 'm', max_output_tokens: 4, temperature: 0,
    input: [{ role: 'user', content: [
      { type: 'input_text', text: 'Look:' }, { type: 'input_image', image_url: `data:image/png;base64,${png}` }] }],
  });
  // 4 output tokens: the response stops at the limit ('incomplete', reason max_output_tokens) or earlier.
  assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  assert.ok(r.usage.input_tokens > 10, JSON.stringify(r.usage));
});

test('broken, truncated and remote images get a 400 and the server keeps serving', { skip }, async () => {
  const bad = [
    'data:image/png;base64,' + png.slice(0, png.length / 2),
    'data:image/gif;base64,R0lGODlhAQABAAAAACw=',
    'data:image/png;base64,@@@@',
    'https://example.com/cat.png',
  ];
  for (const url of bad) {
    const r = await postJson(srv.base, '/v1/chat/completions', {
      model: 'm', max_tokens: 2, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }],
    });
    assert.equal(r.status, 400, url + ' -> ' + r.text);
  }
  const remote = await postJson(srv.base, '/v1/chat/completions', {
    model: 'm', max_tokens: 2, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: bad[3] } }] }],
  });
  assert.match(remote.json.error.message, /not fetched/);
  const ok = await ask('still there?');
  assert.ok(ok.choices.length === 1);
});

test('a server without --mmproj refuses images with a 400', { skip }, async () => {
  const plain = await startServer(['-m', model]);
  try {
    const r = await postJson(plain.base, '/v1/chat/completions', {
      model: 'm', max_tokens: 2,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } }] }],
    });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /--mmproj/);
  } finally {
    await plain.stop();
  }
});
