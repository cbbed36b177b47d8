// The page: wires the chat, the memory view, conversations, settings, server info and keyboard shortcuts.
import { getJson, tryJson, apiKey, setApiKey, onKeyNeeded } from './api.js';
import { Chat } from './chat.js';
import { MemoryView } from './memory.js';
import { el, fmtNum } from './render.js';
import {
  listConversations, loadConversation, newConversation, saveConversation, deleteConversation, selectMessage,
  branchCount, activePath,
} from './store.js';

const SETTINGS = 'rewind.settings';
const DEFAULTS = { system: '', temperature: 0.8, top_p: 0.95, top_k: 40, min_p: 0.05, max_tokens: 256, seed: -1,
  cache_prompt: true, thinking: true };

const $ = sel => document.querySelector(sel);

function loadSettings() {
  try { return { ...DEFAULTS, ...JSON.parse(localStorage.getItem(SETTINGS) || '{}') }; } catch { return { ...DEFAULTS }; }
}

let settings = loadSettings();
let conv = null;

function samplingBody() {
  const b = { temperature: settings.temperature, top_p: settings.top_p, top_k: settings.top_k, min_p: settings.min_p,
    cache_prompt: settings.cache_prompt };
  if (settings.max_tokens > 0) b.max_tokens = settings.max_tokens;
  if (settings.seed >= 0) b.seed = settings.seed;
  if (!settings.thinking) b.chat_template_kwargs = { enable_thinking: false };
  return b;
}

const memory = new MemoryView($('#memory'), {
  onRequestClick: (c, m) => showMessage(c, m),
  onStatus: e => setStatus(e ? (e.status === 401 ? 'API key needed' : 'unreachable') : 'ready', e ? 'err' : 'ok',
    e ? e.message : ''),
});

function setStatus(text, cls, title = '') {
  const pill = $('#server-status');
  pill.textContent = text;
  pill.className = 'pill ' + cls;
  pill.title = title;
}
const chat = new Chat($('#chat'), {
  settings: () => ({ system: settings.system.trim(), sampling: samplingBody() }),
  onChanged: c => { if (c === conv) renderConversations(); },
  onReport: () => refreshRequests(),
  onInspect: (m, reveal) => {
    memory.inspect(m);
    if (reveal && !matchMedia('(min-width: 1100px)').matches) setTab('memory');
  },
  onBusy: b => memory.setFast(b),
});

// --- conversations ---------------------------------------------------------------------------------------
function renderConversations() {
  const ul = $('#conversations');
  ul.replaceChildren(...listConversations().map(c => {
    const b = branchCount(c);
    return el('li', { class: c.id === conv?.id ? 'active' : null },
      el('button', { class: 'conv', onclick: () => open(c.id), title: c.title },
        el('span', { class: 'title', text: c.title }),
        b ? el('span', { class: 'badge', title: `${b} branch point${b > 1 ? 's' : ''} (edits, regenerations)`,
          text: `${b} branch${b > 1 ? 'es' : ''}` }) : null),
      el('button', { class: 'icon small del', title: 'Delete', 'aria-label': 'Delete conversation',
        onclick: () => remove(c.id) }, '×'));
  }));
}

function open(id) {
  conv = loadConversation(id) || newConversation();
  localStorage.setItem('rewind.current', conv.id);
  chat.show(conv);
  // The memory view starts on the latest answer's report.
  const answered = activePath(conv).filter(m => m.report);
  if (answered.length) chat.inspect(answered[answered.length - 1].id);
  renderConversations();
  document.body.classList.remove('sidebar-open');
  $('#input').focus();
}

function startNew() {
  const empty = listConversations().find(c => Object.keys(c.msgs).length === 1);
  if (empty) return open(empty.id);
  conv = newConversation();
  saveConversation(conv);
  open(conv.id);
}

function remove(id) {
  if (!confirm('Delete this conversation?')) return;
  deleteConversation(id);
  if (conv?.id === id) {
    const rest = listConversations();
    rest.length ? open(rest[0].id) : startNew();
  } else {
    renderConversations();
  }
  refreshRequests();
}

// Opens the conversation holding message `msgId`, shows the branch that leads to it and selects it.
function showMessage(convId, msgId) {
  if (conv?.id !== convId) open(convId);
  const m = conv.msgs[msgId];
  if (!m) return;
  for (let x = m; x.parent; x = conv.msgs[x.parent]) selectMessage(conv, x.id);
  saveConversation(conv);
  chat.render();
  chat.inspect(msgId);
  setTab('chat');
  document.querySelector(`[data-id="${msgId}"]`)?.scrollIntoView({ block: 'center' });
}

function refreshRequests() {
  const list = [];
  for (const c of listConversations()) {
    for (const m of Object.values(c.msgs)) if (m.report) list.push({ convId: c.id, msgId: m.id, time: m.time, report: m.report });
  }
  list.sort((a, b) => b.time - a.time);
  list.forEach((q, i) => { q.n = list.length - i; });
  memory.setRequests(list);
}

// --- settings and the API key ------------------------------------------------------------------------------
function openSettings() {
  const f = $('#settings-form');
  for (const [k, v] of Object.entries(settings)) {
    const input = f.elements[k];
    if (!input) continue;
    if (input.type === 'checkbox') input.checked = v; else input.value = v;
  }
  f.elements.api_key.value = apiKey();
  $('#settings').showModal();
}

function readSettings() {
  const f = $('#settings-form');
  const next = { ...settings };
  for (const k of Object.keys(DEFAULTS)) {
    const input = f.elements[k];
    if (input.type === 'checkbox') next[k] = input.checked;
    else if (input.type === 'number') next[k] = input.value === '' ? DEFAULTS[k] : Number(input.value);
    else next[k] = input.value;
  }
  settings = next;
  localStorage.setItem(SETTINGS, JSON.stringify(settings));
  setApiKey(f.elements.api_key.value.trim());
}

$('#settings').addEventListener('close', readSettings);
$('#btn-reset').addEventListener('click', () => {
  settings = { ...DEFAULTS };
  $('#settings').close();
  openSettings();
});

let keyWaiters = null;
onKeyNeeded(() => {
  if (keyWaiters) return keyWaiters.promise;
  let resolve;
  const promise = new Promise(r => { resolve = r; });
  keyWaiters = { promise };
  const dlg = $('#keydlg');
  $('#key-input').value = '';
  dlg.addEventListener('close', () => {
    keyWaiters = null;
    resolve($('#key-input').value.trim() || null);
  }, { once: true });
  dlg.showModal();
  return promise;
});

// --- server info -------------------------------------------------------------------------------------------
async function serverInfo() {
  const health = await tryJson('/health');
  if (health) setStatus('ready', 'ok'); else setStatus('loading…', 'wait');
  if (!health) return setTimeout(serverInfo, 1000);
  try {
    const models = await getJson('/v1/models');
    const m = models.data[0];
    const meta = m.meta || {};
    $('#model-info').textContent = m.id;
    $('#model-info').title = meta.path || '';
    const props = await tryJson('/props');
    const lines = [`Model ${m.id}${meta.path ? ' (' + meta.path + ')' : ''}`,
      `context ${fmtNum(meta.n_ctx)} per slot (trained ${fmtNum(meta.n_ctx_train)}), vocabulary ${fmtNum(meta.n_vocab)}, ` +
      `${fmtNum(meta.n_parallel)} slots`];
    if (props?.build_info) lines.push('build ' + props.build_info);
    $('#server-info').replaceChildren(...lines.map(t => el('div', { text: t })));
    memory.start();
  } catch (e) {
    setStatus(e.status === 401 ? 'API key needed' : 'error', 'err', e.message);
    setTimeout(serverInfo, 3000);
  }
}

// --- layout and keyboard -----------------------------------------------------------------------------------
function setTab(name) {
  for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('active', b.dataset.tab === name);
  for (const p of document.querySelectorAll('.pane')) p.classList.toggle('active', p.id === name);
  if (name === 'memory' && memory.started) memory.poll();
}

for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => setTab(b.dataset.tab));
$('#btn-sidebar').addEventListener('click', () => document.body.classList.toggle('sidebar-open'));
$('#btn-new').addEventListener('click', startNew);
$('#btn-settings').addEventListener('click', openSettings);

document.addEventListener('keydown', e => {
  if (e.key === 'Escape' && chat.busy) { e.preventDefault(); chat.stop(); return; }
  if (e.key === 'Escape') document.body.classList.remove('sidebar-open');
  if (e.altKey && !e.ctrlKey && !e.metaKey) {
    const actions = {
      n: startNew, c: () => document.body.classList.toggle('sidebar-open'), s: openSettings,
      r: () => chat.regenerate(), e: () => chat.editLastUser(), 1: () => setTab('chat'), 2: () => setTab('memory'),
      '[': () => chat.switchDeepestBranch(-1), ']': () => chat.switchDeepestBranch(1),
    };
    const key = e.code.startsWith('Digit') ? e.code.slice(5) : e.code === 'BracketLeft' ? '['
      : e.code === 'BracketRight' ? ']' : e.code.startsWith('Key') ? e.code.slice(3).toLowerCase() : e.key;
    if (actions[key]) { e.preventDefault(); actions[key](); }
    return;
  }
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName);
  if (e.key === '/' && !typing) { e.preventDefault(); $('#input').focus(); }
});
window.addEventListener('storage', () => { renderConversations(); refreshRequests(); });

// --- start -------------------------------------------------------------------------------------------------
const last = localStorage.getItem('rewind.current');
if (last && loadConversation(last)) open(last); else startNew();
refreshRequests();
serverInfo();
