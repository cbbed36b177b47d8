// Claude Code, Codex and qwen-code, the versions pinned in package.json, run live in their non-interactive modes
// against `rewind serve`: with the demo model (Qwen3.5's template) and with a tiny Granite 4.0 hybrid model
// serving Granite's published template (tools in its own format). Each run must exit 0 having printed an
// answer, with no 4xx in the server's request log. Skips, saying why, when the clients cannot be installed from
// the npm registry. Settings: clients.js and docs/clients.md.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer } from '../harness.js';
import { CLIENTS, HERE, VERSIONS, clientAvailable, installClients, runClient } from './clients.js';

const PROMPT = 'Say hello in one word.';
// No answer is capped: each client fails on an answer cut at a token cap (Claude Code: "exceeded the N output
// token maximum"; Codex: "Incomplete response returned"). The demo model's random answer ends where it samples
// an end token, the same place every run (a fixed seed). --reasoning-format none: the random text never closes
// the <think> block the template opens, and a client prints no reasoning; so the whole answer is content.
const SERVER_ARGS = ['--cache-dir', '', '--log-requests', '--seed', '7', '--reasoning-format', 'none'];

let installed = false;
let skipReason = '';
const tiny = { dir: null, model: null };

before(async () => {
  installed = await installClients();
  if (!installed) skipReason = 'the pinned clients could not be installed from the npm registry (npm ci failed)';
  // The second model: the tiny Granite 4.0 hybrid preset with Granite's template.
  tiny.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rewind-agents-model-'));
  tiny.model = path.join(tiny.dir, 'tiny-granite-h.gguf');
  const vocab = path.join(HERE, '..', '..', 'data', 'vocab', 'tiny-qwen35-vocab.gguf');
  execFileSync(process.env.REWIND_BIN, ['make-model', '--preset', 'tiny-granite-h', '--vocab', vocab, '-q',
    '-o', tiny.model], { stdio: 'ignore' });
});

after(() => {
  if (tiny.dir) fs.rmSync(tiny.dir, { recursive: true, force: true });
});

const MODELS = {
  demo: () => [],
  'tiny-granite-h': () => ['-m', tiny.model, '-c', '65536', '--alias', 'rewind-demo', '--chat-template-file',
    path.join(HERE, '..', '..', 'data', 'chat', 'granite-4.0.jinja')],
};

for (const [modelName, modelArgs] of Object.entries(MODELS)) {
  for (const name of Object.keys(CLIENTS)) {
    const version = VERSIONS[CLIENTS[name].package];
    test(`${name} ${version} completes a prompt against rewind serve (${modelName} model)`, { timeout: 300000 },
      async (t) => {
        if (!installed) return t.skip(skipReason);
        if (!(await clientAvailable(name))) return t.skip(`${CLIENTS[name].package} is installed but does not run`);
        const srv = await startServer([...SERVER_ARGS, ...modelArgs()]);
        try {
          const r = await runClient(name, srv.base, PROMPT, { timeoutMs: 280000 });
          const where = `exit ${r.code} after ${r.ms} ms\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr.slice(-3000)}` +
            `\n--- server log\n${srv.log().slice(-3000)}`;
          console.log(`${name} ${version} (${modelName}): exit ${r.code} in ${r.ms} ms, ` +
            `answer ${JSON.stringify(r.stdout.trim().slice(0, 80))}`);
          assert.equal(r.code, 0, where);
          assert.ok(r.stdout.trim().length > 0, `no answer printed\n${where}`);
          assert.match(srv.log(), /\/v1\/\S+ (stream|json) slot=/, `the client got no answer from a model endpoint\n${where}`);
          assert.doesNotMatch(srv.log(), /(GET|POST) \S+ 4\d\d /, `a 4xx in the server log\n${where}`);
        } finally {
          await srv.stop();
        }
      });
  }
}
