#!/usr/bin/env node
// Captures what each coding agent sends across a tool-using session, for replay.test.js (docs/clients.md):
//   cd tests/e2e/agents && npm ci && node capture.js [claude|codex|qwen ...]
// Runs the client's non-interactive mode against scripted_server.js (which calls a shell / listing tool twice,
// then answers) and writes captures/<client>.json: the client's version, the prompt and every model request
// (path and body) in order. Side requests a client makes besides the session (title generation, memory agents)
// are kept too: the replay sends them all.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CLIENTS, HERE, VERSIONS, runClient } from './clients.js';

const PROMPT = 'List the files in this folder with a tool, then say done.';

async function startScripted(logPath) {
  const p = spawn(process.execPath, [path.join(HERE, 'scripted_server.js'), '--log', logPath, '--port', '0'],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/[\d.]+:(\d+)/);
      if (m) resolve(Number(m[1]));
    });
    p.on('exit', (c) => reject(new Error(`scripted server exited (${c})`)));
  });
  return { proc: p, base: `http://127.0.0.1:${port}` };
}

async function capture(name) {
  const logPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rewind-capture-')), 'requests.jsonl');
  const srv = await startScripted(logPath);
  try {
    const r = await runClient(name, srv.base, PROMPT, { timeoutMs: 300000 });
    if (r.code !== 0) throw new Error(`${name} exited ${r.code}:\n${r.stdout}\n${r.stderr}`);
  } finally {
    srv.proc.kill();
  }
  const requests = fs.readFileSync(logPath, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
    .filter((r) => r.method === 'POST' && r.body && typeof r.body === 'object')
    .map((r) => ({ path: r.path, user_agent: r.headers['user-agent'] || '', body: r.body }));
  const out = { client: CLIENTS[name].package, version: VERSIONS[CLIENTS[name].package], prompt: PROMPT, requests };
  fs.mkdirSync(path.join(HERE, 'captures'), { recursive: true });
  const file = path.join(HERE, 'captures', `${name}.json`);
  fs.writeFileSync(file, JSON.stringify(out) + '\n');
  console.log(`${file}: ${requests.length} requests`);
}

const names = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(CLIENTS);
for (const n of names) {
  if (!CLIENTS[n]) throw new Error(`unknown client '${n}' (one of ${Object.keys(CLIENTS).join(', ')})`);
  await capture(n);
}
