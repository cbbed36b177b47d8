// Speculative decoding over the streaming API: at temperature 0 a server with --spec streams exactly the tokens
// and logprobs of a server without it. Two drafter set-ups: the MTP head and n-gram lookup (mostly rejected on
// the random demo model: rollbacks), and the served model as its own draft model (always accepted).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, FAKE } from './harness.js';

let plain, spec, self;
before(async () => {
  if (FAKE) return;  // the scripted fake engine has no drafters
  plain = await startServer();
  const model = plain.log().match(/loading (\S+\.gguf)/)[1];
  spec = await startServer(['--spec', 'mtp,ngram', '--draft-max', '4']);
  self = await startServer(['--spec', 'draft', '--model-draft', model, '--draft-max', '6']);
});
after(async () => {
  for (const s of [plain, spec, self]) if (s) await s.stop();
});

async function streamTokens(srv, messages) {
  const stream = await srv.client.chat.completions.create({
    model: 'm', messages, max_tokens: 40, temperature: 0, stream: true, logprobs: true, top_logprobs: 2,
  });
  const out = [];
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      for (const t of ch.logprobs?.content ?? []) {
        out.push({ token: t.token, logprob: t.logprob, top: t.top_logprobs.map((x) => [x.token, x.logprob]) });
      }
    }
  }
  return out;
}

async function metric(srv, name) {
  const text = await (await fetch(`${srv.base}/metrics`)).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

test('speculative streaming equals plain streaming token by token, logprobs included', { skip: FAKE }, async () => {
  const prompts = [
    'Write a short poem about the sea.',
    'Repeat after me: one two three four, one two three four, one two three four, one two three four.',
    'List the days of the week.',
  ];
  for (const p of prompts) {
    const messages = [{ role: 'user', content: p }];
    const a = await streamTokens(plain, messages);
    assert.ok(a.length > 0, 'tokens were generated');
    assert.deepEqual(await streamTokens(spec, messages), a, `mtp,ngram; prompt: ${p}`);
    assert.deepEqual(await streamTokens(self, messages), a, `self-draft; prompt: ${p}`);
  }
  // Drafting really happened, with rejections (rollbacks) on one server and acceptances on the other.
  assert.ok(await metric(spec, 'rewind_spec_rollbacks_total') > 0);
  assert.ok(await metric(self, 'rewind_spec_accepted_total') > 20);
  assert.equal(await metric(plain, 'rewind_spec_drafted_total'), 0);
});
