// Small DOM helpers and a safe text renderer (code fences and inline code; no HTML from the model).

export function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) e.append(k);
  return e;
}

// Text -> nodes: ```fenced``` blocks become <pre><code>, `inline` becomes <code>, the rest stays text
// (white-space: pre-wrap keeps its lines).
export function richText(text) {
  const frag = document.createDocumentFragment();
  const parts = text.split(/```/);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const nl = part.indexOf('\n');
      const lang = nl > 0 ? part.slice(0, nl).trim() : '';
      const code = nl >= 0 && /^[\w+-]*$/.test(lang) ? part.slice(nl + 1) : part;
      frag.append(el('pre', { class: 'code', 'data-lang': lang || null }, el('code', { text: code })));
      return;
    }
    part.split(/(`[^`\n]+`)/).forEach(s => {
      if (s.length > 2 && s.startsWith('`') && s.endsWith('`')) frag.append(el('code', { text: s.slice(1, -1) }));
      else if (s) frag.append(document.createTextNode(s));
    });
  });
  return frag;
}

export function fmtBytes(n) {
  if (!Number.isFinite(n)) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0) : n.toFixed(0)) + ' ' + u[i];
}

export function fmtMs(ms) {
  if (!Number.isFinite(ms)) return '–';
  return ms < 1000 ? ms.toFixed(ms < 10 ? 1 : 0) + ' ms' : (ms / 1000).toFixed(2) + ' s';
}

export function fmtNum(n) { return Number.isFinite(n) ? n.toLocaleString('en-US') : '–'; }
