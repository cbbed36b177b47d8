// Replicas sharing checkpoints through Redis (docs/replicas.md), end to end: a real redis-server and haproxy
// started by the test on free loopback ports in a temporary folder, three `rewind serve` replicas of the demo
// model with --remote-cache, and a --no-cache server as the reference.
//  - a conversation's next turn on another replica resumes there from the remote tier ("source": "remote") with
//    the reference's exact tokens and logprobs;
//  - haproxy (deploy/haproxy.cfg) sends one X-Session-Id to one replica;
//  - with Redis killed mid-conversation every request is still answered, identically;
//  - with the replica serving a session killed (-9), haproxy sends the session elsewhere and every request is
//    still answered, identically.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { startServer, postJson } from '../harness.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const missing = ['redis-server', 'haproxy'].filter((c) => !has(c));
const skip = missing.length ? `${missing.join(', ')} not installed (scripts/install-deps.sh)` : false;

const freePort = () => new Promise((resolve) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let dir, redis, redisPort, proxy, front, replicas = [], reference;

async function startRedis() {
  redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
    '--appendonly', 'no'], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    if (spawnSync('redis-cli', ['-p', String(redisPort), 'ping']).stdout?.toString().includes('PONG')) return;
    await sleep(50);
  }
  throw new Error('redis-server did not start');
}

before(async () => {
  if (skip) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rewind-replicas-'));
  redisPort = await freePort();
  await startRedis();
  const url = `redis://127.0.0.1:${redisPort}`;
  const keyFile = path.join(dir, 'remote.key');  // the replicas' shared key (docs/replicas.md, "Trust")
  fs.writeFileSync(keyFile, 'e2e replicas shared key, 32 bytes\n');
  for (let i = 0; i < 3; i++) {
    replicas.push(await startServer(['--cache-dir', path.join(dir, `r${i}`), '--remote-cache', url,
      '--remote-cache-key-file', keyFile,
      '--log-requests=false']));
  }
  reference = await startServer(['--no-cache', '--cache-dir', '']);
  front = await freePort();
  const cfg = fs.readFileSync(path.join(here, '../../../deploy/haproxy.cfg'), 'utf8')
    .replace('@FRONT@', front)
    .replace('@SERVERS@', replicas.map((r, i) => `  server r${i} 127.0.0.1:${r.base.split(':').pop()}`).join('\n'))
    .replace('@BALANCE@', 'balance hash var(txn.affinity)');
  fs.writeFileSync(path.join(dir, 'haproxy.cfg'), cfg);
  proxy = spawn('haproxy', ['-f', path.join(dir, 'haproxy.cfg'), '-db'], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    try { if ((await fetch(`http://127.0.0.1:${front}/health`)).status === 200) break; } catch { /* starting */ }
    await sleep(100);
  }
});

after(async () => {
  for (const r of [...replicas, reference]) if (r) await r.stop();
  proxy?.kill('SIGKILL');
  redis?.kill('SIGKILL');
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

function chat(messages) {
  return { messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 0 };
}

async function ask(server, messages, headers = {}) {
  const r = await fetch(server + '/v1/chat/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(chat(messages)),
  });
  const j = await r.json();
  assert.equal(r.status, 200, JSON.stringify(j));
  return j;
}

const tokensOf = (j) => j.choices[0].logprobs.content.map((c) => [c.token, c.logprob]);

// The remote writer is asynchronous: wait until a replica has written what it queued.
async function drained(server) {
  for (let i = 0; i < 200; i++) {
    const c = await (await fetch(server.base + '/cache')).json();
    if (c.remote_queued_bytes === 0 && c.remote_written > 0) return c;
    await sleep(25);
  }
  throw new Error('the remote writer did not drain');
}

const long = (n) => Array.from({ length: n }, (_, i) => `line ${i}: the quick brown fox jumps over the lazy dog.`).join('\n');

test('a next turn on another replica resumes from the remote tier, bit for bit', { skip }, async () => {
  const turn1 = [{ role: 'system', content: long(40) }, { role: 'user', content: 'Summarise the lines above.' }];
  const a1 = await ask(replicas[0].base, turn1);
  await drained(replicas[0]);
  const turn2 = [...turn1, { role: 'assistant', content: a1.choices[0].message.content },
    { role: 'user', content: 'And now in one word?' }];
  const b2 = await ask(replicas[1].base, turn2);
  const want = await ask(reference.base, turn2);
  assert.equal(b2.cache.source, 'remote', JSON.stringify(b2.cache));
  assert.ok(b2.cache.remote_bytes > 0);
  assert.ok(b2.cache.resume_pos > 0);
  assert.deepEqual(tokensOf(b2), tokensOf(want));
  const metrics = await (await fetch(replicas[1].base + '/metrics')).text();
  assert.match(metrics, /rewind_remote_loaded_total 1/);
});

test('haproxy sends one session to one replica', { skip }, async () => {
  const count = async (r) => {
    const m = await (await fetch(r.base + '/metrics')).text();
    const hit = m.match(/rewind_server_http_requests_total\{route="\/v1\/chat\/completions",status="200"\} (\d+)/);
    return hit ? Number(hit[1]) : 0;
  };
  const before = await Promise.all(replicas.map(count));
  for (let i = 0; i < 4; i++) {
    await ask(`http://127.0.0.1:${front}`, [{ role: 'user', content: `question ${i}` }], { 'X-Session-Id': 'conv-42' });
  }
  // A request's counter is bumped as its response is written: the client can read the answer (and /metrics)
  // before the last one lands, so poll briefly until all four are counted somewhere.
  let served = [];
  for (let t = 0; t < 40; t++) {
    const after = await Promise.all(replicas.map(count));
    served = after.map((n, i) => n - before[i]);
    if (served.reduce((a, b) => a + b, 0) >= 4) break;
    await sleep(50);
  }
  assert.deepEqual(served.filter((n) => n > 0), [4], `requests per replica: ${served}`);
});

test('with Redis killed mid-conversation every request is answered identically', { skip }, async () => {
  const turn1 = [{ role: 'system', content: long(25) }, { role: 'user', content: 'Count the lines.' }];
  const a1 = await ask(replicas[2].base, turn1);
  redis.kill('SIGKILL');
  await sleep(100);
  const turn2 = [...turn1, { role: 'assistant', content: a1.choices[0].message.content },
    { role: 'user', content: 'Again?' }];
  for (const r of replicas) {
    const got = await ask(r.base, turn2);
    const want = await ask(reference.base, turn2);
    assert.deepEqual(tokensOf(got), tokensOf(want));
    assert.notEqual(got.cache.source, 'remote');
  }
  await startRedis();  // back: nothing to serve (flushed), requests still fine
  await sleep(300);
  const again = await ask(replicas[0].base, turn2);
  assert.deepEqual(tokensOf(again), tokensOf(await ask(reference.base, turn2)));
});

test('with a replica killed mid-conversation every request through haproxy is answered identically', { skip }, async () => {
  const proxied = `http://127.0.0.1:${front}`;
  const session = { 'X-Session-Id': 'conv-killed-replica' };
  const chats = async () => Promise.all(replicas.map(async (r) => {
    const m = await (await fetch(r.base + '/metrics')).text();
    const hit = m.match(/rewind_server_http_requests_total\{route="\/v1\/chat\/completions",status="200"\} (\d+)/);
    return hit ? Number(hit[1]) : 0;
  }));
  const earlier = await chats();
  let turn = [{ role: 'system', content: long(30) }, { role: 'user', content: 'Which line mentions a fox?' }];
  const first = await ask(proxied, turn, session);
  const later = await chats();
  const victim = later.findIndex((n, i) => n > earlier[i]);
  assert.ok(victim >= 0);
  await drained(replicas[victim]);
  replicas[victim].proc.kill('SIGKILL');
  replicas[victim] = null;
  // The pooled keep-alive connection to the proxy may be dropped with the dead replica's: a client retries a
  // dropped connection once, as the OpenAI and Anthropic SDKs do; haproxy redispatches the request itself.
  const askRetrying = async (messages) => {
    try { return await ask(proxied, messages, session); } catch (e) {
      if (!(e instanceof TypeError)) throw e;  // fetch's connection error, not an answer
      return ask(proxied, messages, session);
    }
  };
  let answer = first;
  for (let i = 0; i < 3; i++) {
    turn = [...turn, { role: 'assistant', content: answer.choices[0].message.content },
      { role: 'user', content: `And line ${i}?` }];
    answer = await askRetrying(turn);
    assert.deepEqual(tokensOf(answer), tokensOf(await ask(reference.base, turn)));
  }
});
