// llama-server command lines start `rewind serve`: the example command lines of llama.cpp's
// tools/server/README.md (v0.5.0; the model path is the test's model, the port a free one) and a line with
// the flags people copy from llama-server set-ups. GPU-only flags give one warning line; refused ones a reason.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startServer, FAKE } from './harness.js';

// README lines, minus `llama-server`, `-m <path>` and `--port N` (the harness adds the model and a free port).
const readmeLines = [
  ['-c', '2048'],                                                  // ./llama-server -m models/7B/ggml-model.gguf -c 2048
  ['-c', '512', '--host', '127.0.0.1'],                            // docker ... -c 512 --host 0.0.0.0 --port 8080
  ['-c', '512', '--host', '127.0.0.1', '--n-gpu-layers', '99'],    // docker (CUDA) ... --n-gpu-layers 99
  ['--ui-config', '{"pasteLongTextToFileLen": 0, "renderUserContentAsMarkdown": true}'],  // -m model.gguf --ui-config ...
];

const commonLine = [
  '-c', '2048', '-np', '2', '-t', '2', '-tb', '2', '-b', '256', '-ub', '256', '-fa', 'on', '-ngl', '99',
  '--jinja', '--chat-template-kwargs', '{"enable_thinking": false}', '--no-mmap', '--mlock', '--api-key', 'sk-test',
  '--reasoning-format', 'deepseek', '--ctx-checkpoints', '8', '--cache-ram', '1024', '--metrics', '--slots',
  '-a', 'my-model', '--props', '--no-webui', '-cb', '--threads-http', '8', '-to', '300',
  '--reasoning-budget', '512', '--reasoning-budget-message', 'Enough thinking.',
];

async function chatOk(srv, headers = {}) {
  const r = await fetch(`${srv.base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, temperature: 0 }),
  });
  const j = await r.json();
  assert.equal(r.status, 200, JSON.stringify(j));
  return j;
}

test('llama-server README example command lines serve', { skip: FAKE && 'the fake server has its own flags' }, async () => {
  for (const args of readmeLines) {
    const srv = await startServer(args);
    try {
      await chatOk(srv);
      if (args.includes('--n-gpu-layers')) {
        const warnings = srv.log().split('\n').filter((l) => /no effect \(GPU-only/.test(l));
        assert.equal(warnings.length, 1, srv.log());
      }
    } finally {
      await srv.stop();
    }
  }
});

test('a llama-server command line with its usual flags serves with their meaning', { skip: FAKE && 'the fake server has its own flags' }, async () => {
  const srv = await startServer(commonLine);
  try {
    assert.match(srv.log(), /-ngl.*-fa|-fa.*-ngl/);  // one line for the GPU-only flags
    assert.doesNotMatch(srv.log(), /--reasoning-budget-message/);  // applied, not warned about
    const unauth = await fetch(`${srv.base}/v1/chat/completions`, { method: 'POST', body: '{}' });
    assert.equal(unauth.status, 401);
    const j = await chatOk(srv, { authorization: 'Bearer sk-test' });
    assert.equal(j.model, 'my-model');
    assert.equal(j.choices[0].message.reasoning_content, undefined);  // enable_thinking false by default
    assert.equal((await fetch(`${srv.base}/props`)).status, 401);  // behind the key, like every endpoint
    const props = await (await fetch(`${srv.base}/props`, { headers: { authorization: 'Bearer sk-test' } })).json();
    assert.equal(props.total_slots, 2);
    assert.equal(props.endpoint_props, true);
    assert.equal(props.default_generation_settings.n_ctx, 2048);
  } finally {
    await srv.stop();
  }
});

test('flags rewind cannot honour are refused with a reason', { skip: FAKE && 'the fake server has its own flags' }, () => {
  const r = spawnSync(process.env.REWIND_BIN, ['serve', '--port', '0', '-hf', 'user/model:Q4_K_M'], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--hf-repo is not supported by rewind: models are not downloaded/);
});
