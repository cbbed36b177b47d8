// The chat pane: renders the active branch of a conversation, streams answers, stops them, edits a past
// message or regenerates an answer (both add a branch), and shows each answer's cache report.
import { streamChat, getText, parseMetrics } from './api.js';
import { el, richText, fmtMs, fmtNum } from './render.js';
import {
  activePath, addMessage, siblings, selectMessage, saveConversation,
} from './store.js';

export class Chat {
  // hooks: settings() -> {system, sampling...}, onChanged(conv), onReport(conv, msg), onInspect(msg, reveal),
  //        onBusy(bool)
  constructor(root, hooks) {
    this.box = root.querySelector('#messages');
    this.input = root.querySelector('#input');
    this.send = root.querySelector('#btn-send');
    this.stopBtn = root.querySelector('#btn-stop');
    this.hooks = hooks;
    this.conv = null;
    this.abort = null;
    this.editing = null;  // id of the message being edited
    this.selected = null; // id of the message whose report is shown
    this.unfolded = new Set(); // messages whose reasoning the reader unfolded
    root.querySelector('#composer').addEventListener('submit', e => { e.preventDefault(); this.submit(); });
    this.stopBtn.addEventListener('click', () => this.stop());
    this.input.addEventListener('keydown', e => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); this.submit(); }
      else if (e.key === 'ArrowUp' && !this.input.value) { e.preventDefault(); this.editLastUser(); }
    });
  }

  get busy() { return this.abort !== null; }

  show(conv) {
    if (this.busy) this.stop();
    this.conv = conv;
    this.editing = null;
    this.render();
  }

  render() {
    const path = this.conv ? activePath(this.conv) : [];
    this.box.replaceChildren(...path.map(m => this.messageEl(m)));
    if (!path.length) {
      this.box.append(el('div', { class: 'empty' },
        el('h2', { text: 'Ask anything' }),
        el('p', { class: 'muted', text: 'Answers stream in; edit a message or regenerate an answer to branch the ' +
          'conversation, and watch the Memory view reuse the shared prefix.' })));
    }
    this.box.scrollTop = this.box.scrollHeight;
  }

  messageEl(m) {
    const c = this.conv;
    const sib = siblings(c, m.id);
    const idx = sib.indexOf(m.id);
    const body = el('div', { class: 'body' });
    this.fillBody(body, m);
    const nav = sib.length > 1 ? el('span', { class: 'branch-nav', title: 'Branches (Alt+[ / Alt+])' },
      el('button', { class: 'icon small', 'aria-label': 'previous branch', disabled: idx === 0,
        onclick: () => this.switchBranch(m.id, -1) }, '‹'),
      el('span', { class: 'branch-pos', text: `${idx + 1}/${sib.length}` }),
      el('button', { class: 'icon small', 'aria-label': 'next branch', disabled: idx === sib.length - 1,
        onclick: () => this.switchBranch(m.id, 1) }, '›')) : null;
    const actions = el('span', { class: 'actions' },
      m.role === 'user'
        ? el('button', { class: 'link', onclick: () => this.startEdit(m.id), title: 'Edit (makes a branch)' }, 'Edit')
        : el('button', { class: 'link', onclick: () => this.regenerate(m.id), disabled: this.busy,
          title: 'Regenerate (makes a branch; Alt+R)' }, 'Regenerate'),
      el('button', { class: 'link', title: 'Copy', onclick: () => navigator.clipboard?.writeText(m.content || '') },
        'Copy'));
    const report = m.report ? el('button', {
      class: 'report', title: m.report.cache?.reason || '',
      onclick: e => { e.stopPropagation(); this.inspect(m.id, true); },
    }, reportSummary(m.report)) : null;
    const div = el('article', {
      class: `msg ${m.role}${m.id === this.selected ? ' selected' : ''}${m.error ? ' error' : ''}`,
      'data-id': m.id, onclick: () => m.report && this.inspect(m.id),
    },
    el('div', { class: 'meta' }, el('span', { class: 'role', text: m.role === 'user' ? 'You' : 'Assistant' }),
      nav, actions),
    body, report ? el('div', { class: 'foot' }, report) : null);
    return div;
  }

  fillBody(body, m) {
    body.replaceChildren();
    if (this.editing === m.id) {
      const ta = el('textarea', { class: 'edit', rows: Math.min(12, (m.content.match(/\n/g) || []).length + 2) });
      ta.value = m.content;
      ta.addEventListener('keydown', e => {
        if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); this.commitEdit(m.id, ta.value); }
        if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); this.editing = null; this.render(); }
      });
      body.append(ta, el('div', { class: 'edit-actions' },
        el('button', { class: 'primary small', onclick: () => this.commitEdit(m.id, ta.value) }, 'Save & send'),
        el('button', { class: 'small', onclick: () => { this.editing = null; this.render(); } }, 'Cancel')));
      requestAnimationFrame(() => { ta.focus(); ta.setSelectionRange(ta.value.length, ta.value.length); });
      return;
    }
    if (m.reasoning) {
      const thinking = m.streaming && !m.content;
      const details = el('details', { class: 'reasoning', open: thinking || this.unfolded.has(m.id) },
        el('summary', { text: thinking ? 'Thinking…' : `Reasoning (${m.reasoning.length} chars)` }),
        el('div', { class: 'reasoning-text', text: m.reasoning }));
      // Remember a fold the reader opened, so streaming updates do not close it again.
      details.querySelector('summary').addEventListener('click', () => {
        if (details.open) this.unfolded.delete(m.id); else this.unfolded.add(m.id);
      });
      body.append(details);
    }
    for (const t of m.tool_calls || []) {
      body.append(el('details', { class: 'tool-call', open: true },
        el('summary', {}, el('span', { class: 'tool-tag', text: 'tool call' }), ' ', el('b', { text: t.name || '?' })),
        el('pre', { class: 'code' }, el('code', { text: prettyArgs(t.arguments) }))));
    }
    const text = el('div', { class: 'text' });
    text.append(richText(m.content || ''));
    if (m.streaming) {
      text.append(el('span', { class: 'cursor' }));
      if (!m.content && !m.reasoning) text.append(el('span', { class: 'muted', text: m.phase || 'waiting…' }));
    }
    body.append(text);
    if (m.error) body.append(el('div', { class: 'err', text: m.error }));
  }

  // Updates one message in place (streaming) without re-rendering the list.
  update(m) {
    const div = this.box.querySelector(`[data-id="${m.id}"]`);
    if (!div) return this.render();
    const nearBottom = this.box.scrollHeight - this.box.scrollTop - this.box.clientHeight < 80;
    div.replaceWith(this.messageEl(m));
    if (nearBottom) this.box.scrollTop = this.box.scrollHeight;
  }

  submit() {
    const text = this.input.value.trim();
    if (!text || this.busy || !this.conv) return;
    this.input.value = '';
    const path = activePath(this.conv);
    const parent = path.length ? path[path.length - 1].id : 'root';
    const u = addMessage(this.conv, parent, { role: 'user', content: text });
    this.generate(u.id);
  }

  startEdit(id) {
    if (this.busy) return;
    this.editing = id;
    this.render();
  }

  editLastUser() {
    const users = activePath(this.conv || { msgs: { root: {} } }).filter(m => m.role === 'user');
    if (users.length) this.startEdit(users[users.length - 1].id);
  }

  commitEdit(id, text) {
    text = text.trim();
    const m = this.conv.msgs[id];
    this.editing = null;
    if (!text || text === m.content) return this.render();
    const u = addMessage(this.conv, m.parent, { role: 'user', content: text });
    this.generate(u.id);
  }

  regenerate(id) {
    if (this.busy) return;
    const m = this.conv.msgs[id || this.lastAssistantId()];
    if (m) this.generate(m.parent);
  }

  lastAssistantId() {
    const path = activePath(this.conv);
    const a = path.filter(m => m.role === 'assistant');
    return a.length ? a[a.length - 1].id : null;
  }

  switchBranch(id, dir) {
    const sib = siblings(this.conv, id);
    const j = sib.indexOf(id) + dir;
    if (j < 0 || j >= sib.length || this.busy) return;
    selectMessage(this.conv, sib[j]);
    saveConversation(this.conv);
    this.render();
    this.hooks.onChanged(this.conv);
  }

  // Alt+[ / Alt+]: switches the branch of the deepest message that has siblings.
  switchDeepestBranch(dir) {
    const path = activePath(this.conv);
    for (let i = path.length - 1; i >= 0; i--) {
      if (siblings(this.conv, path[i].id).length > 1) return this.switchBranch(path[i].id, dir);
    }
  }

  // Shows message `id`'s cache report in the memory view (reveal: also on narrow screens, switching tabs).
  inspect(id, reveal = false) {
    this.selected = id;
    for (const d of this.box.querySelectorAll('.msg')) d.classList.toggle('selected', d.dataset.id === id);
    this.hooks.onInspect(this.conv.msgs[id], reveal);
  }

  stop() { if (this.abort) this.abort.abort(); }

  async generate(parentId) {
    const conv = this.conv;
    const s = this.hooks.settings();
    const history = [];
    if (s.system) history.push({ role: 'system', content: s.system });
    for (let m = conv.msgs[parentId]; m && m.role !== 'root'; m = conv.msgs[m.parent]) {
      const h = { role: m.role, content: m.content || '' };
      if (m.tool_calls && m.tool_calls.length) {
        h.tool_calls = m.tool_calls.map((t, i) => ({ id: t.id || `call_${i}`, type: 'function',
          function: { name: t.name, arguments: t.arguments } }));
      }
      history.splice(s.system ? 1 : 0, 0, h);
    }
    const a = addMessage(conv, parentId, { role: 'assistant', content: '', reasoning: '', tool_calls: [],
      streaming: true, phase: 'processing the prompt…' });
    saveConversation(conv);
    this.abort = new AbortController();
    this.setBusy(true);
    this.render();
    const body = { messages: history, stream_options: { include_usage: true }, ...s.sampling };
    const rollbacksBefore = await this.rollbacks();
    const t0 = performance.now();
    let ttft = null;
    const report = {};
    let dirty = false;
    const flush = () => { if (dirty && this.conv === conv) this.update(a); dirty = false; };
    const timer = setInterval(() => {
      if (!a.content && !a.reasoning) {
        a.phase = `processing the prompt… ${((performance.now() - t0) / 1000).toFixed(1)} s`;
        dirty = true;
      }
      flush();
    }, 50);
    try {
      await streamChat(body, this.abort.signal, j => {
        const ch = j.choices && j.choices[0];
        const d = ch && ch.delta;
        const first = d && (d.content || d.reasoning_content || d.tool_calls) && ttft === null;
        if (first) ttft = performance.now() - t0;
        if (d?.content) a.content += d.content;
        if (d?.reasoning_content) a.reasoning += d.reasoning_content;
        for (const t of d?.tool_calls || []) {
          const slot = a.tool_calls[t.index] || (a.tool_calls[t.index] = { id: t.id, name: '', arguments: '' });
          if (t.function?.name) slot.name += t.function.name;
          if (t.function?.arguments) slot.arguments += t.function.arguments;
        }
        if (ch?.finish_reason) report.finish = ch.finish_reason;
        if (j.timings) report.timings = j.timings;
        if (j.cache) report.cache = j.cache;
        if (j.usage) report.usage = j.usage;
        if (j.model) report.model = j.model;
        dirty = true;
        if (first) flush(); // the first text shows at once, the rest at most every 50 ms
      });
    } catch (e) {
      if (e.name === 'AbortError') report.finish = 'stopped';
      else a.error = e.message;
    } finally {
      clearInterval(timer);
    }
    a.tool_calls = a.tool_calls.filter(Boolean);
    a.streaming = false;
    delete a.phase;
    report.ttft_ms = ttft;
    report.total_ms = performance.now() - t0;
    const rollbacksAfter = await this.rollbacks();
    if (rollbacksBefore !== null && rollbacksAfter !== null) report.rollbacks = rollbacksAfter - rollbacksBefore;
    if (report.timings || report.cache) a.report = report;
    this.abort = null;
    this.setBusy(false);
    saveConversation(conv);
    if (this.conv === conv) {
      this.render();
      if (a.report) this.inspect(a.id);
    }
    if (a.report) this.hooks.onReport(conv, a);
    this.hooks.onChanged(conv);
  }

  // The server's speculative rollback counter (a per-request difference; exact when requests run one at a time).
  async rollbacks() {
    try {
      const m = parseMetrics(await getText('/metrics'));
      return m.rewind_spec_rollbacks_total ?? null;
    } catch { return null; }
  }

  setBusy(b) {
    this.send.hidden = b;
    this.stopBtn.hidden = !b;
    this.hooks.onBusy(b);
  }
}

function prettyArgs(s) {
  try { return JSON.stringify(JSON.parse(s), null, 2); } catch { return s || ''; }
}

export function reportSummary(r) {
  const t = r.timings || {};
  const prompt = (t.cache_n ?? 0) + (t.prompt_n ?? 0);
  const parts = [];
  if (r.cache) parts.push(`${fmtNum(t.cache_n ?? r.cache.resume_pos)}/${fmtNum(prompt)} reused · ${r.cache.source}`);
  if (r.ttft_ms !== null && r.ttft_ms !== undefined) parts.push('TTFT ' + fmtMs(r.ttft_ms));
  if (t.predicted_per_second) parts.push(t.predicted_per_second.toFixed(1) + ' t/s');
  if (r.finish === 'stopped') parts.push('stopped');
  return parts.join(' · ');
}
