// The memory view: polls GET /cache, /cache/tree and /metrics and draws the budget, the prefix tree (token
// ranges as lengths, checkpoints as marks, pins highlighted, evictions fading out) and the request reports.
import { getJson, getText, parseMetrics } from './api.js';
import { el, fmtBytes, fmtMs, fmtNum } from './render.js';
import { drawTree } from './tree.js';

const GHOST_MS = 4000; // an evicted node stays visible (fading) this long

export class MemoryView {
  constructor(root, hooks) {
    this.root = root;
    this.hooks = hooks; // onRequestClick(convId, msgId), onStatus(error | null) after each poll
    this.fast = false;
    this.timer = null;
    this.prevNodes = new Map();
    this.ghosts = new Map(); // id -> {node, since}
    this.highlight = null;   // {resume_pos, lcp, source, reason, label}
    this.requests = [];      // {convId, msgId, n, report}
    this.lastTree = null;
    this.lastStats = null;
    this.svg = root.querySelector('#tree');
    new ResizeObserver(() => this.drawTree()).observe(root.querySelector('#tree-wrap'));
  }

  start() {
    this.started = true;
    this.poll();
  }

  setFast(b) {
    this.fast = b;
    if (b) { clearTimeout(this.timer); this.poll(); }
  }

  async poll() {
    clearTimeout(this.timer);
    // Nothing to fetch while the view is hidden (another tab, or the chat tab on a narrow screen).
    if (!document.hidden && this.root.offsetParent !== null) {
      try {
        const [stats, tree, metrics] = await Promise.all([
          getJson('/cache'), getJson('/cache/tree'), getText('/metrics').then(parseMetrics).catch(() => ({}))]);
        this.lastStats = stats;
        this.metrics = metrics;
        this.noteTree(tree);
        this.renderBudget(stats, tree);
        this.renderStats(stats, tree, metrics);
        this.drawTree();
        this.root.classList.remove('stale');
        this.hooks.onStatus?.(null);
      } catch (e) {
        this.root.classList.add('stale');
        this.hooks.onStatus?.(e);
        this.root.querySelector('#tree-text').textContent = '(' + e.message + ')';
      }
    }
    this.timer = setTimeout(() => this.poll(), this.fast ? 300 : 1500);
  }

  // Tracks nodes that disappeared since the last poll (evicted) so they fade out instead of vanishing.
  noteTree(tree) {
    const now = performance.now();
    const cur = new Map(tree.nodes.map(n => [n.id, n]));
    for (const [id, n] of this.prevNodes) {
      if (!cur.has(id)) this.ghosts.set('g' + id + '@' + now, { node: { ...n, id: 'g' + id + '@' + now, evicted: true }, since: now });
    }
    for (const [k, g] of this.ghosts) if (now - g.since > GHOST_MS) this.ghosts.delete(k);
    this.prevNodes = cur;
    this.lastTree = tree;
  }

  renderBudget(s, tree) {
    const budget = s.budget_bytes || 1;
    const ck = s.checkpoint_bytes || 0;
    const pages = Math.max(0, (s.used_bytes || 0) - ck);
    const reserved = Math.min(s.reserved_bytes || 0, Math.max(0, budget - s.used_bytes));
    const free = Math.max(0, budget - s.used_bytes - reserved);
    const segs = [
      ['kv', 'KV pages', pages], ['ckpt', 'checkpoints', ck], ['reserved', 'reserved', reserved], ['free', 'free', free]];
    const bar = this.root.querySelector('#budget-bar');
    bar.replaceChildren(...segs.filter(x => x[2] > 0).map(([cls, label, v]) =>
      el('div', { class: 'seg ' + cls, style: `flex-grow:${v}`, title: `${label}: ${fmtBytes(v)}` })));
    // When the cache uses a sliver of a large budget, a second bar shows what the used part is made of.
    const inUse = pages + ck + reserved;
    const zoom = this.root.querySelector('#budget-zoom-wrap');
    zoom.hidden = !(inUse > 0 && inUse < 0.1 * budget);
    if (!zoom.hidden) {
      this.root.querySelector('#budget-zoom').replaceChildren(...segs.slice(0, 3).filter(x => x[2] > 0).map(([cls, label, v]) =>
        el('div', { class: 'seg ' + cls, style: `flex-grow:${v}`, title: `${label}: ${fmtBytes(v)}` })));
    }
    this.root.querySelector('#budget-legend').replaceChildren(...segs.map(([cls, label, v]) =>
      el('span', {}, el('i', { class: 'sw ' + cls }), `${label} ${fmtBytes(v)}`)));
    this.root.querySelector('#budget-text').textContent =
      `${fmtBytes(s.used_bytes)} used of ${fmtBytes(budget)} (${pct(s.used_bytes / budget)})`;
    const wrap = this.root.querySelector('#disk-bar-wrap');
    wrap.hidden = !tree.disk_tier;
    if (tree.disk_tier) {
      const lim = tree.disk_limit_bytes || Math.max(tree.disk_bytes, 1);
      this.root.querySelector('#disk-text').textContent =
        `${fmtNum(tree.disk_files)} files, ${fmtBytes(tree.disk_bytes)} of ${fmtBytes(lim)}` +
        ` · spilled ${fmtNum(s.disk_files_spilled)}, written ${fmtNum(s.disk_files_written)}, loaded ${fmtNum(s.disk_files_loaded)}`;
      this.root.querySelector('#disk-bar').replaceChildren(
        el('div', { class: 'seg disk', style: `flex-grow:${tree.disk_bytes}`, title: fmtBytes(tree.disk_bytes) }),
        el('div', { class: 'seg free', style: `flex-grow:${Math.max(0, lim - tree.disk_bytes)}` }));
    }
  }

  renderStats(s, tree, m) {
    const item = (k, v, title) => el('span', { class: 'stat', title: title || null }, el('b', { text: v }), ' ' + k);
    const spec = m.rewind_spec_drafted_total
      ? [item('drafted', fmtNum(m.rewind_spec_drafted_total)), item('accepted', fmtNum(m.rewind_spec_accepted_total)),
        item('rollbacks', fmtNum(m.rewind_spec_rollbacks_total))] : [];
    this.root.querySelector('#cache-stats').replaceChildren(
      item('pages', `${fmtNum(s.pages_used)}/${fmtNum(s.pages_total)}`, `${s.page_tokens} tokens per page`),
      item('checkpoints', fmtNum(s.checkpoints)),
      item('tree nodes', fmtNum(s.tree_nodes)),
      item('sequences', fmtNum(s.sequences)),
      item('evictions', fmtNum(s.evictions)),
      item('restores', fmtNum(m.rewind_cache_restores_total ?? NaN), 'states restored from checkpoints'),
      item('replays', fmtNum(m.rewind_cache_replays_total ?? NaN), 'states rebuilt from the replay log'),
      ...spec);
    const shown = tree.nodes.length < tree.nodes_total ? ` (first ${tree.nodes.length} shown)` : '';
    this.root.querySelector('#tree-text').textContent =
      `${fmtNum(tree.nodes_total)} nodes, ${fmtNum(tree.sequences.length)} sequences${shown}`;
  }

  drawTree() {
    if (!this.lastTree) return;
    const ghosts = [...this.ghosts.values()].map(g => ({
      ...g.node, fade: Math.max(0.15, 1 - (performance.now() - g.since) / GHOST_MS) }));
    drawTree(this.svg, this.lastTree, ghosts, this.highlight);
    const d = this.root.querySelector('#tree-detail');
    d.textContent = this.highlight ? this.highlight.label : 'Click an answer in the chat (or a row below) to see ' +
      'where its prompt resumed.';
  }

  // A chat message was selected: mark where its prompt resumed and why.
  inspect(msg) {
    const r = msg && msg.report;
    if (!r || !r.cache) { this.highlight = null; return this.drawTree(); }
    const c = r.cache;
    const t = r.timings || {};
    const prompt = (t.cache_n ?? 0) + (t.prompt_n ?? 0);
    const from = c.source === 'checkpoint' ? `checkpoint at ${fmtNum(c.resume_pos)}`
      : c.source === 'none' ? 'the start (nothing reusable)' : `${c.source} state at ${fmtNum(c.resume_pos)}`;
    this.highlight = {
      resume_pos: c.resume_pos, lcp: c.lcp, source: c.source,
      label: `Selected answer: prompt ${fmtNum(prompt)} tokens, resumed from ${from}, LCP ${fmtNum(c.lcp)}, ` +
        `processed ${fmtNum(t.prompt_n)} — ${c.reason}`,
    };
    this.drawTree();
    for (const tr of this.root.querySelectorAll('#requests tbody tr')) tr.classList.toggle('selected', tr.dataset.msg === msg.id);
  }

  // The reports of this browser's requests (newest first), from the stored conversations.
  setRequests(list) {
    this.requests = list;
    const rows = list.slice(0, 50).flatMap(q => {
      const r = q.report;
      const t = r.timings || {};
      const c = r.cache || {};
      const prompt = (t.cache_n ?? 0) + (t.prompt_n ?? 0);
      const spec = t.draft_n ? `${fmtNum(t.draft_n)}/${fmtNum(t.draft_n_accepted)}` +
        (r.rollbacks ? ` ↺${fmtNum(r.rollbacks)}` : '') : '–';
      const click = () => this.hooks.onRequestClick(q.convId, q.msgId);
      return [
        el('tr', { class: 'req', 'data-msg': q.msgId, onclick: click },
          el('td', { text: q.n }),
          el('td', { class: 'num', text: fmtNum(prompt) }),
          el('td', { class: 'num', text: fmtNum(t.cache_n) }),
          el('td', { class: 'num', text: fmtNum(t.prompt_n) }),
          el('td', {}, el('span', { class: 'src ' + (c.source || ''), text: c.source || '–' })),
          el('td', { class: 'num', text: fmtMs(r.ttft_ms) }),
          el('td', { class: 'num', text: fmtMs(t.prompt_ms) }),
          el('td', { class: 'num', text: t.predicted_per_second ? rate(t.predicted_per_second) : '–' }),
          el('td', { class: 'num', text: spec, title: 'drafted/accepted tokens ↺rollbacks' })),
        el('tr', { class: 'why', 'data-msg': q.msgId, onclick: click },
          el('td', {}), el('td', { colspan: 8, class: 'reason', text: c.reason || '' })),
      ];
    });
    this.root.querySelector('#requests tbody').replaceChildren(...rows);
  }
}

function pct(f) { return (100 * f).toFixed(f < 0.01 ? 2 : 1) + '%'; }

function rate(r) { return r.toFixed(r < 100 ? 1 : 0) + ' t/s'; }
