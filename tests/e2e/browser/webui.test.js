// The built-in web page in headless Chromium (Debian's `chromium`, driven by puppeteer-core): chat with
// streaming, regenerate and edit (branches), the memory view's tree with a checkpoint, no console errors, the
// API key prompt. Screenshots are saved to $REWIND_E2E_ARTIFACTS (default: build/e2e-artifacts). CHROMIUM=path
// picks the browser (a missing path skips).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, FAKE } from '../harness.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = process.env.REWIND_E2E_ARTIFACTS || path.resolve(here, '../../../build/e2e-artifacts');

function findChromium() {
  if (process.env.CHROMIUM) return fs.existsSync(process.env.CHROMIUM) ? process.env.CHROMIUM : null;
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      return execFileSync('sh', ['-c', `command -v ${name}`]).toString().trim();
    } catch { /* not installed */ }
  }
  return null;
}

const chromium = findChromium();
const skip = FAKE ? 'the browser test runs against the real engine only'
  : !chromium ? 'chromium not installed (scripts/install-deps.sh installs it): browser test skipped' : false;
if (skip) console.log('# SKIP webui: ' + skip);

let puppeteer;
const tmp = [];
function tmpDir(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tmp.push(d);
  return d;
}

async function launch() {
  return puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: tmpDir('rewind-chromium-'),
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

// A page that records console errors and failed requests.
async function openPage(browser, url, viewport) {
  const page = await browser.newPage();
  await page.setViewport(viewport);
  const errors = [];
  page.on('console', m => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  page.on('pageerror', e => errors.push('page error: ' + e.message));
  page.on('requestfailed', r => errors.push('request failed: ' + r.url()));
  page.on('response', r => { if (r.status() >= 400) errors.push(`HTTP ${r.status()} ${r.url()}`); });
  // Short answers keep the test cheap; without thinking the demo model's text streams as content.
  await page.evaluateOnNewDocument(() => {
    if (!localStorage.getItem('rewind.settings')) {
      localStorage.setItem('rewind.settings', JSON.stringify({ max_tokens: 48, temperature: 1.0, thinking: false }));
    }
  });
  await page.goto(url, { waitUntil: 'load' });
  return { page, errors };
}

async function shot(page, name) {
  fs.mkdirSync(artifacts, { recursive: true });
  const file = path.join(artifacts, name);
  await page.screenshot({ path: file });
  console.log('# screenshot ' + file);
}

// Waits for the current answer to finish; returns the lengths of its text seen while it streamed.
async function waitAnswer(page, count) {
  return page.evaluate(async (n) => {
    const seen = new Set();
    const t0 = Date.now();
    for (;;) {
      const msgs = document.querySelectorAll('.msg.assistant');
      const last = msgs[msgs.length - 1];
      if (last) {
        const streaming = !!last.querySelector('.cursor');
        const text = last.querySelector('.text')?.textContent || '';
        if (streaming && text.length) seen.add(text.length);
        if (msgs.length >= n && !streaming && last.querySelector('.report')) return [...seen];
        if (last.querySelector('.err')) throw new Error(last.querySelector('.err').textContent);
      }
      if (Date.now() - t0 > 120000) throw new Error('no answer within 120 s');
      await new Promise(r => setTimeout(r, 15));
    }
  }, count);
}

let srv;
before(async () => {
  if (skip) return;
  puppeteer = (await import('puppeteer-core')).default;
  srv = await startServer(['--cache-dir', tmpDir('rewind-webui-cache-')]);
});
after(async () => {
  if (srv) await srv.stop();
  for (const d of tmp) fs.rmSync(d, { recursive: true, force: true });
});

test('chat streams, regenerates into a branch, and the memory view shows the tree and its checkpoints',
  { skip }, async () => {
    const browser = await launch();
    try {
      const { page, errors } = await openPage(browser, srv.base + '/', { width: 1400, height: 900 });
      await page.waitForSelector('#server-status.ok', { timeout: 30000 });
      // The model's name comes from /v1/models, which may answer after /health on a loaded machine.
      await page.waitForFunction(() => /rewind-demo/.test(document.querySelector('#model-info')?.textContent ?? ''),
        { timeout: 30000 });
      assert.match(await page.$eval('#model-info', e => e.textContent), /rewind-demo/);

      await page.type('#input', 'Tell me about prefix caches.');
      await page.keyboard.press('Enter');
      const streamed = await waitAnswer(page, 1);
      assert.ok(streamed.length >= 1, 'text appeared while the answer was still streaming');
      const first = await page.$eval('.msg.assistant .text', e => e.textContent);
      assert.ok(first.length > 0);

      // Regenerate from the keyboard (Alt+R): a second answer to the same prompt, shown as branch 2/2.
      await page.keyboard.down('Alt');
      await page.keyboard.press('KeyR');
      await page.keyboard.up('Alt');
      await page.waitForFunction(() => document.querySelector('.branch-pos')?.textContent === '2/2');
      await waitAnswer(page, 1);
      await page.waitForFunction(() => document.querySelector('.branch-pos')?.textContent === '2/2');
      // The second request reused the prompt's prefix (its report says so in the requests table).
      await page.waitForFunction(() => document.querySelectorAll('#requests tbody tr.req').length === 2);
      const reused = await page.$eval('#requests tbody tr.req td:nth-child(3)', e => Number(e.textContent.replace(/,/g, '')));
      assert.ok(reused > 0, 'the regenerated answer reused cached tokens');

      // A follow-up on the new branch resumes from the checkpoint at the end of the previous turn.
      await page.type('#input', 'And what do checkpoints add?');
      await page.keyboard.press('Enter');
      await waitAnswer(page, 2);
      await page.waitForFunction(() => document.querySelectorAll('#requests tbody tr.req').length === 3);
      const source = await page.$eval('#requests tbody tr.req .src', e => e.textContent);
      assert.notEqual(source, 'none', 'the follow-up reused the conversation so far');

      // The memory view: a branch connector and a checkpoint mark in the prefix tree.
      await page.waitForFunction(() => document.querySelectorAll('#tree path.link').length >= 1 &&
        document.querySelectorAll('#tree .mark.ram').length >= 1, { timeout: 20000 });
      // Clicking an answer marks where its prompt resumed.
      await page.click('.msg.assistant:last-of-type .report');
      await page.waitForFunction(() => /resumed from/.test(document.querySelector('#tree-detail').textContent));
      assert.ok(await page.$('#tree .hl-resume'));
      const budget = await page.$eval('#budget-text', e => e.textContent);
      assert.match(budget, /used of/);
      await shot(page, 'webui-chat-memory.png');

      // Branch navigation back to the first answer (which has no follow-up).
      await page.click('.branch-nav button[aria-label="previous branch"]');
      await page.waitForFunction(() => document.querySelector('.branch-pos')?.textContent === '1/2');
      assert.equal(await page.$eval('.msg.assistant .text', e => e.textContent), first);
      assert.equal(await page.$$eval('.msg', l => l.length), 2);

      // Editing the first message makes a branch at the user's turn, answered anew.
      await page.click('.msg.user button.link[title^="Edit"]');
      await page.waitForSelector('.msg.user textarea.edit');
      // The page focuses the editor (caret at the end) in the next animation frame: keys typed before that land
      // elsewhere (seen on a loaded machine: ' Br' lost).
      await page.waitForFunction(() => document.activeElement?.matches('.msg.user textarea.edit'));
      await page.keyboard.type(' Briefly.');
      await page.keyboard.press('Enter');
      await waitAnswer(page, 1);
      await page.waitForFunction(() => document.querySelector('.msg.user .branch-pos')?.textContent === '2/2');
      assert.match(await page.$eval('.msg.user .text', e => e.textContent), /prefix caches\. Briefly\.$/);
      await page.waitForFunction(() => document.querySelectorAll('#requests tbody tr.req').length === 4);

      // Phone-sized: the tabs switch between chat and memory.
      await page.setViewport({ width: 390, height: 800, isMobile: true, hasTouch: true });
      await shot(page, 'webui-phone-chat.png');
      await page.click('#tabs button[data-tab="memory"]');
      await page.waitForSelector('#memory.active');
      await shot(page, 'webui-phone-memory.png');
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  });

test('with --api-key the page asks for the key and then works', { skip }, async () => {
  const keyed = await startServer(['--cache-dir', '', '--api-key', 'webui-secret']);
  const browser = await launch();
  try {
    const { page, errors } = await openPage(browser, keyed.base + '/', { width: 1200, height: 800 });
    await page.waitForSelector('#keydlg[open]', { timeout: 30000 });
    await page.type('#key-input', 'webui-secret');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /used of/.test(document.querySelector('#budget-text').textContent),
      { timeout: 20000 });
    assert.equal(await page.evaluate(() => localStorage.getItem('rewind.apiKey')), 'webui-secret');
    // The 401s that made the page ask are the only errors the browser reports.
    assert.ok(errors.length > 0 && errors.every(e => /401/.test(e)), errors.join('\n'));
  } finally {
    await browser.close();
    await keyed.stop();
  }
});
