// Draws the prefix tree as SVG: one row per branch, x = token position, so a node's bar is as long as its
// token range. Checkpoints are diamonds at their position (a ring when the file is also on disk), running
// sequences dashed bars past the node they leased, pinned nodes outlined, evicted nodes fading red.
import { fmtBytes, fmtNum } from './render.js';

const NS = 'http://www.w3.org/2000/svg';
const ROW = 26;
const BAR = 14;
const TOP = 28;
const PAD = 14;

function s(tag, attrs, title) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) e.setAttribute(k, v);
  if (title) {
    const t = document.createElementNS(NS, 'title');
    t.textContent = title;
    e.append(t);
  }
  return e;
}

// Items: tree nodes, ghosts (evicted) and running sequences, as one forest keyed by id.
function forest(tree, ghosts) {
  const items = new Map();
  for (const n of tree.nodes) items.set(n.id, { ...n, kind: 'node', kids: [] });
  for (const g of ghosts) items.set(g.id, { ...g, kind: 'ghost', kids: [] });
  for (const q of tree.sequences) {
    const base = items.get(q.node);
    const start = base ? base.end : 0;
    items.set('s' + q.id, {
      id: 's' + q.id, kind: 'seq', parent: base ? q.node : 0, start, end: Math.max(start, q.pos), seq: q,
      ckpts: q.checkpoints.filter(c => c.pos > start), kids: [],
    });
  }
  const roots = [];
  for (const it of items.values()) {
    const p = items.get(it.parent);
    (p && p !== it ? p.kids : roots).push(it);
  }
  const order = it => (it.kind === 'seq' ? 2 : it.kind === 'ghost' ? 1 : 0);
  const sortKids = list => {
    list.sort((a, b) => order(a) - order(b) || (a.start - b.start) || String(a.id).localeCompare(String(b.id)));
    for (const it of list) sortKids(it.kids);
  };
  sortKids(roots);
  return { items, roots };
}

export function drawTree(svg, tree, ghosts, hl) {
  const { items, roots } = forest(tree, ghosts);
  // Rows: a node sits on its first child's row, so the longest-lived trunk stays on one line.
  let rows = 0;
  const place = it => {
    if (!it.kids.length) { it.row = rows++; return; }
    it.kids.forEach((k, i) => { place(k); if (i === 0) it.row = k.row; });
  };
  roots.forEach(place);
  let maxPos = 1;
  for (const it of items.values()) maxPos = Math.max(maxPos, it.end);
  for (const d of tree.disk_only) maxPos = Math.max(maxPos, d.pos);
  if (hl) maxPos = Math.max(maxPos, hl.lcp, hl.resume_pos);
  const width = Math.max(320, svg.parentElement.clientWidth);
  const diskRow = tree.disk_only.length ? 1 : 0;
  const height = TOP + Math.max(1, rows + diskRow) * ROW + 10;
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  const x = p => PAD + (p / maxPos) * (width - 2 * PAD);
  const y = r => TOP + r * ROW + ROW / 2;
  const g = [];

  // Axis: a tick every "nice" step of tokens.
  const step = niceStep(maxPos / Math.max(2, Math.floor((width - 2 * PAD) / 90)));
  for (let p = 0; p <= maxPos; p += step) {
    g.push(s('line', { x1: x(p), x2: x(p), y1: TOP - 6, y2: height - 4, class: 'grid' }));
    g.push(s('text', { x: x(p), y: TOP - 10, class: 'tick', 'text-anchor': p === 0 ? 'start' : 'middle' }, null));
    g[g.length - 1].textContent = fmtNum(p);
  }
  if (!items.size && !diskRow) {
    const t = s('text', { x: width / 2, y: TOP + ROW, class: 'empty-text', 'text-anchor': 'middle' });
    t.textContent = 'empty: nothing cached yet';
    g.push(t);
  }

  for (const it of items.values()) {
    const parent = items.get(it.parent);
    const yy = y(it.row);
    if (parent && parent.row !== it.row) {
      // Branch connector: down from the parent's row at the branch position.
      g.push(s('path', { d: `M${x(it.start)},${y(parent.row) + BAR / 2} V${yy} H${x(it.start) + 4}`, class: 'link ' + it.kind,
        opacity: it.fade }));
    }
    const w = Math.max(2, x(it.end) - x(it.start));
    const cls = `bar ${it.kind}${it.pins > 0 ? ' pinned' : ''}${it.seq && it.seq.idle ? ' idle' : ''}`;
    g.push(s('rect', { x: x(it.start), y: yy - BAR / 2, width: w, height: BAR, rx: 3, class: cls, opacity: it.fade,
      'data-node': it.id }, describe(it)));
    // The token count inside the bar, when it fits between the checkpoint marks at its ends.
    const len = it.end - it.start;
    const label = fmtNum(len) + (w > 90 ? ' tokens' : '');
    if (len > 0 && w > label.length * 6.5 + 22) {
      const t = s('text', { x: x(it.start) + w / 2, y: yy + 3.5, class: 'len ' + it.kind, 'text-anchor': 'middle' });
      t.textContent = label;
      g.push(t);
    }
    if (it.ckpt) g.push(mark(x(it.ckpt.pos), yy, it.ckpt, it.fade, hl));
    for (const c of it.ckpts || []) g.push(mark(x(c.pos), yy, c, 1, hl));
  }
  if (diskRow) {
    const yy = y(rows);
    const t = s('text', { x: PAD, y: yy + 4, class: 'tick' });
    t.textContent = 'disk only';
    g.push(t);
    for (const d of tree.disk_only) {
      g.push(s('rect', { x: x(d.pos) - 4, y: yy - 4, width: 8, height: 8, class: 'mark disk-only' },
        `checkpoint file at ${fmtNum(d.pos)} (${fmtBytes(d.bytes)}), evicted from RAM`));
    }
  }
  if (hl) {
    g.push(s('line', { x1: x(hl.lcp), x2: x(hl.lcp), y1: TOP - 4, y2: height - 4, class: 'hl-lcp' },
      `LCP ${fmtNum(hl.lcp)}`));
    g.push(s('line', { x1: x(hl.resume_pos), x2: x(hl.resume_pos), y1: TOP - 4, y2: height - 4, class: 'hl-resume' },
      `resumed at ${fmtNum(hl.resume_pos)} (${hl.source})`));
  }
  svg.replaceChildren(...g);
}

function mark(cx, cy, c, fade, hl) {
  const r = 6;
  const hit = hl && hl.source !== 'none' && hl.resume_pos === c.pos;
  const d = `M${cx},${cy - r} L${cx + r},${cy} L${cx},${cy + r} L${cx - r},${cy} Z`;
  const grp = document.createElementNS(NS, 'g');
  if (c.disk) grp.append(s('circle', { cx, cy, r: r + 3, class: 'mark-disk', opacity: fade }));
  if (c.remote) grp.append(s('circle', { cx, cy, r: r + 6, class: 'mark-remote', opacity: fade }));
  grp.append(s('path', { d, class: 'mark ram' + (hit ? ' hit' : ''), opacity: fade, 'data-ckpt': c.pos },
    `checkpoint at ${fmtNum(c.pos)}: ${fmtBytes(c.bytes)} in RAM${c.disk ? ', also on disk' : ''}${c.remote ? ', shared in the remote tier' : ''}` +
    (hit ? ' — served the selected answer' : '')));
  return grp;
}

function describe(it) {
  const range = `tokens ${fmtNum(it.start)}–${fmtNum(it.end)} (${fmtNum(it.end - it.start)})`;
  if (it.kind === 'seq') {
    return `running sequence ${it.seq.id}${it.seq.idle ? ' (idle, adoptable)' : ''}: ${range}, reserve ` +
      `${fmtNum(it.seq.reserve)} tokens`;
  }
  const ck = it.ckpt ? `, checkpoint at ${fmtNum(it.ckpt.pos)}` : '';
  const pin = it.pins > 0 ? `, pinned by ${it.pins} lease${it.pins > 1 ? 's' : ''}` : '';
  return `${it.kind === 'ghost' ? 'evicted ' : ''}node ${String(it.id).replace(/@.*/, '')}: ${range}, ` +
    `${it.pages} pages${ck}${pin}`;
}

function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(1, raw))));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}
