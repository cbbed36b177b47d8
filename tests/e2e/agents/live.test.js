// Claude Code, Codex and qwen-code, the versions pinned in package.json, run live in their non-interactive modes
// against `rewind serve`: with the demo model and its template (Qwen3.5's) and with the demo model serving
// Granite 4.0's published template (tools in its own format). Each run must exit 0 having printed an
// answer, with no 4xx in the server's request log. Skips, saying why, when the clients cannot be installed from
// the npm registry. Settings: clients.js and docs/clients.md.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
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

before(async () => {
  installed = await installClients();
  if (!installed) skipReason = 'the pinned clients could not be installed from the npm registry (npm install failed)';
});

// The demo model with its own template (Qwen3.5's: refuses late system messages, XML tool calls) and with
// Granite 4.0's published template (tools in its own JSON format). The second is the demo's weights, not the
// tiny Granite hybrid preset's: a random model answers until it samples an end token, which the demo's weights
// do within a thousand tokens or so and the tiny Granite's (measured: 3 minutes of decoding, no end) do not.
const MODELS = {
  demo: [],
  'demo weights, Granite 4.0 template': ['--chat-template-file',
    path.join(HERE, '..', '..', 'data', 'chat', 'granite-4.0.jinja')],
};

for (const [modelName, modelArgs] of Object.entries(MODELS)) {
  for (const name of Object.keys(CLIENTS)) {
    const version = VERSIONS[CLIENTS[name].package];
    test(`${name} ${version} completes a prompt against rewind serve (${modelName})`, { timeout: 300000 },
      async (t) => {
        if (!installed) return t.skip(skipReason);
        if (!(await clientAvailable(name))) return t.skip(`${CLIENTS[name].package} is installed but does not run`);
        const srv = await startServer([...SERVER_ARGS, ...modelArgs]);
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
