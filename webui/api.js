// The server's HTTP API as the page uses it: the API key (kept in this browser), JSON requests, and the
// server-sent events of a streamed chat completion.

const KEY = 'rewind.apiKey';
let askKey = null; // async () => key | null, set by the page (a dialog)

export function apiKey() { return localStorage.getItem(KEY) || ''; }
export function setApiKey(k) { k ? localStorage.setItem(KEY, k) : localStorage.removeItem(KEY); }
export function onKeyNeeded(fn) { askKey = fn; }

function headers(extra) {
  const h = { ...extra };
  const k = apiKey();
  if (k) h.Authorization = 'Bearer ' + k;
  return h;
}

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function errorOf(res) {
  let msg = res.status + ' ' + res.statusText;
  try {
    const j = await res.json();
    if (j && j.error && j.error.message) msg = j.error.message;
  } catch { /* not JSON */ }
  return new ApiError(res.status, msg);
}

// fetch with the key; a 401 asks for the key once and retries.
export async function request(path, init = {}) {
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(path, { ...init, headers: headers(init.headers) });
    if (res.status === 401 && attempt === 0 && askKey) {
      const k = await askKey();
      if (k) { setApiKey(k); continue; }
    }
    if (!res.ok) throw await errorOf(res);
    return res;
  }
}

export async function getJson(path) { return (await request(path)).json(); }

export async function getText(path) { return (await request(path)).text(); }

// GET that answers null instead of failing (optional endpoints such as /props).
export async function tryJson(path) {
  try {
    const res = await fetch(path, { headers: headers() });
    return res.ok ? await res.json() : null;
  } catch { return null; }
}

// Streams POST /v1/chat/completions: onChunk(parsed JSON) per event. Resolves when the stream ends.
export async function streamChat(body, signal, onChunk) {
  const res = await request('/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  });
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, nl);
      buf = buf.slice(nl + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        const j = JSON.parse(data);
        if (j.error) throw new ApiError(j.error.code || 500, j.error.message || 'generation failed');
        onChunk(j);
      }
    }
  }
}

// Prometheus text -> {name: value} for unlabelled samples (and name{labels} keys for labelled ones).
export function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const sp = line.lastIndexOf(' ');
    out[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return out;
}
