// Replays the captured sessions of real coding agents (captures/*.json, made by capture.js) against `rewind serve`:
// every request must be answered (200, the API's own shape), and from the second request of a session on, the
// prompt tokens read from the cache must be at least 90% of the prompt, as the API's usage fields report them
// (Messages: cache_read_input_tokens of input_tokens + cache_read_input_tokens; Responses:
// input_tokens_details.cached_tokens of input_tokens; chat: prompt_tokens_details.cached_tokens of prompt_tokens).
// The answers are capped at a few tokens (the demo model's are random); the requests are otherwise sent as
// captured, streaming or not. Needs no client installed. Prints the measured percentages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../harness.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DIR = process.env.REWIND_CAPTURES || path.join(HERE, 'captures');
const MIN_CACHED = 0.9;
const MAX_TOKENS = 8;

// Usage of one answer: {prompt, cached} in tokens, from a JSON body or an SSE stream.
function usageOf(apiPath, text, streamed) {
  const events = [];
  if (streamed) {
    for (const line of text.split('\n')) {
      if (line.startsWith('data: ') && line !== 'data: [DONE]') events.push(JSON.parse(line.slice(6)));
    }
  } else {
    events.push(JSON.parse(text));
  }
  let prompt = null;
  let cached = null;
  for (const e of events) {
    if (apiPath.includes('/messages')) {
      // message_start carries the prompt size, message_delta (last) the final figures with the cache reads.
      const u = e.type === 'message_start' ? e.message.usage : e.type === 'message' || e.type === 'message_delta'
        ? e.usage : null;
      if (u) {
        cached = u.cache_read_input_tokens || 0;
        prompt = u.input_tokens + cached + (u.cache_creation_input_tokens || 0);
      }
    } else if (apiPath.includes('/responses')) {
      const r = e.object === 'response' ? e
        : e.type === 'response.completed' || e.type === 'response.incomplete' ? e.response : null;
      if (r && r.usage) {
        prompt = r.usage.input_tokens;
        cached = r.usage.input_tokens_details.cached_tokens;
      }
    } else if (e.usage) {
      prompt = e.usage.prompt_tokens;
      cached = (e.usage.prompt_tokens_details || {}).cached_tokens || 0;
    }
  }
  return { prompt, cached };
}

// The request as captured with a small answer cap (and usage asked for where a stream must be told to).
function capped(apiPath, body) {
  const b = structuredClone(body);
  if (apiPath.includes('/responses')) b.max_output_tokens = MAX_TOKENS;
  else b.max_tokens = MAX_TOKENS;
  if (b.max_completion_tokens !== undefined) b.max_completion_tokens = MAX_TOKENS;
  if (apiPath.includes('/chat/completions') && b.stream) b.stream_options = { include_usage: true };
  return b;
}

const captures = fs.existsSync(DIR) ? fs.readdirSync(DIR).filter((f) => f.endsWith('.json')).sort() : [];

test('there are captured sessions to replay', () => {
  assert.ok(captures.length >= 3, `captures in ${DIR}: ${captures.join(', ')}`);
});

for (const file of captures) {
  const cap = JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8'));
  test(`${cap.client} ${cap.version}: every captured request is answered and later turns read >= 90% from the cache`,
    { timeout: 600000 }, async () => {
      // Each session on a fresh server: the first request fills the cache, the later ones must hit it.
      const srv = await startServer(['--cache-dir', '', '--log-requests']);
      try {
        const rows = [];
        for (let i = 0; i < cap.requests.length; ++i) {
          const { path: apiPath, body } = cap.requests[i];
          const r = await fetch(srv.base + apiPath, {
            method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(capped(apiPath, body)),
          });
          const text = await r.text();
          assert.equal(r.status, 200, `request ${i} (${apiPath}): ${text.slice(0, 500)}`);
          const u = usageOf(apiPath, text, body.stream === true);
          assert.ok(u.prompt > 0, `request ${i}: no usage in the answer: ${text.slice(-500)}`);
          rows.push({ i, path: apiPath.split('?')[0], ...u, pct: (100 * u.cached) / u.prompt });
        }
        for (const row of rows) {
          console.log(`${cap.client} ${cap.version} request ${row.i} ${row.path}: prompt ${row.prompt}, ` +
            `cached ${row.cached} (${row.pct.toFixed(1)}%)`);
        }
        // Later turns of the session: a request whose prompt extends an earlier one's (side requests with their
        // own system prompt, such as a title or memory agent's first request, start their own chain).
        const later = rows.filter((row, k) => k > 0 && rows.slice(0, k).some((p) => row.prompt > p.prompt &&
          sameSession(cap.requests[row.i].body, cap.requests[p.i].body)));
        assert.ok(later.length >= 1, 'no later turn to check');
        for (const row of later) {
          assert.ok(row.cached >= MIN_CACHED * row.prompt,
            `request ${row.i}: ${row.cached} of ${row.prompt} prompt tokens from the cache (< 90%)`);
        }
        assert.doesNotMatch(srv.log(), /(GET|POST) \S+ 4\d\d /, 'no 4xx in the server log');
      } finally {
        await srv.stop();
      }
    });
}

// Two requests of the same conversation: the same system prompt (Claude Code's per-request checksum aside) and
// the same first message.
function sameSession(a, b) {
  const key = (x) => JSON.stringify([x.system ?? x.instructions ?? null,
    (x.messages || x.input || []).slice(0, 1)]).replace(/cch=[0-9a-f]+/g, 'cch=');
  return key(a) === key(b);
}
