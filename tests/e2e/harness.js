// Starts the server under test on a free port and stops it afterwards.
import { spawn } from 'node:child_process';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

export const FAKE = process.env.REWIND_E2E_FAKE === '1';

export async function startServer(extraArgs = []) {
  const bin = process.env.REWIND_BIN;
  if (!bin) throw new Error('REWIND_BIN is not set (use tests/e2e/run.sh)');
  const args = FAKE ? ['--port', '0', ...extraArgs] : ['serve', '--port', '0', ...extraArgs];
  if (!FAKE && process.env.REWIND_E2E_MODEL) args.push('-m', process.env.REWIND_E2E_MODEL);
  const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not start:\n' + log)), 120000);
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/[\d.]+:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}):\n${log}`)); });
    proc.on('error', (e) => { clearTimeout(timer); reject(e); });
  });
  proc.stdout.on('data', (d) => { log += d.toString(); });
  proc.stderr.on('data', (d) => { log += d.toString(); });
  const base = `http://127.0.0.1:${port}`;
  // 503 while loading, 200 when ready.
  for (let i = 0; ; i++) {
    try {
      const r = await fetch(`${base}/health`);
      if (r.status === 200) break;
      if (r.status !== 503) throw new Error(`/health answered ${r.status}`);
    } catch (e) {
      if (i > 1200) throw e;
    }
    if (i > 1200) throw new Error('model did not load in time:\n' + log);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base,
    proc,
    log: () => log,
    client: new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 }),
    anthropic: new Anthropic({ baseURL: base, apiKey: 'unused', maxRetries: 0, timeout: 120000 }),
    async stop() {
      proc.removeAllListeners('exit');
      proc.kill('SIGTERM');
      await new Promise((r) => { proc.on('exit', r); setTimeout(r, 5000); });
    },
  };
}

export async function postJson(base, path, body, raw = false) {
  const r = await fetch(base + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: raw ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text };
}
