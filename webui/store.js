// Conversations in the browser's storage (localStorage). A conversation is a tree of messages: editing a
// message or regenerating an answer adds a sibling (a branch); each message remembers which child is shown.

const PREFIX = 'rewind.conv.';

function uid() { return Date.now().toString(36) + Math.random().toString(36).slice(2, 8); }

export function listConversations() {
  const out = [];
  for (let i = 0; i < localStorage.length; i++) {
    const k = localStorage.key(i);
    if (!k.startsWith(PREFIX)) continue;
    try { out.push(JSON.parse(localStorage.getItem(k))); } catch { /* skip a damaged entry */ }
  }
  return out.sort((a, b) => b.updated - a.updated);
}

export function loadConversation(id) {
  try { return JSON.parse(localStorage.getItem(PREFIX + id)); } catch { return null; }
}

export function saveConversation(c) {
  c.updated = Date.now();
  try {
    localStorage.setItem(PREFIX + c.id, JSON.stringify(c));
  } catch (e) {
    console.warn('conversation not saved (storage full?)', e);
  }
}

export function deleteConversation(id) { localStorage.removeItem(PREFIX + id); }

export function newConversation() {
  const c = { id: uid(), title: 'New chat', created: Date.now(), updated: Date.now(), msgs: {} };
  c.msgs.root = { id: 'root', role: 'root', children: [], sel: null };
  return c;
}

// The messages shown: from the root, following each message's selected child.
export function activePath(c) {
  const out = [];
  let m = c.msgs.root;
  while (m.sel && c.msgs[m.sel]) {
    m = c.msgs[m.sel];
    out.push(m);
  }
  return out;
}

// Adds a message under `parentId` and shows it. Returns the message.
export function addMessage(c, parentId, fields) {
  const m = { id: uid(), parent: parentId, children: [], sel: null, time: Date.now(), ...fields };
  c.msgs[m.id] = m;
  const p = c.msgs[parentId];
  p.children.push(m.id);
  p.sel = m.id;
  if (c.title === 'New chat' && m.role === 'user' && m.content) c.title = m.content.slice(0, 60);
  return m;
}

export function siblings(c, id) {
  const m = c.msgs[id];
  return c.msgs[m.parent].children;
}

// Shows sibling `id` (and, below it, the branch it last showed).
export function selectMessage(c, id) { c.msgs[c.msgs[id].parent].sel = id; }

// Number of branch points in the conversation (messages with more than one child).
export function branchCount(c) {
  return Object.values(c.msgs).filter(m => m.children.length > 1).length;
}
