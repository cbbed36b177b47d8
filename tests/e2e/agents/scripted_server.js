#!/usr/bin/env node
// A scripted model server for capturing what coding agents send (node stdlib only).
//   node scripted_server.js --log requests.jsonl [--port 0] [--tool-turns 2]
// Speaks the three wire APIs the agents use, streaming or not:
//   POST /v1/messages (Anthropic), POST /v1/responses (OpenAI Responses), POST /v1/chat/completions
// and GET /v1/models. Every request is appended to the log as one JSON line {method, path, headers, body}.
// It answers like a model: while the conversation holds fewer than --tool-turns tool results and the request
// offers a tool it knows (a shell or a directory listing, under the names Claude Code, Codex and qwen-code
// use), it calls that tool; otherwise it answers "Done. The folder lists N entries." (or a short text).
// Prints "listening on http://127.0.0.1:PORT" when ready.
import http from 'node:http';
import fs from 'node:fs';

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const logPath = opt('--log', null);
const port = Number(opt('--port', '0'));
const toolTurns = Number(opt('--tool-turns', '2'));
let seq = 0;

// Known tools and the arguments a scripted call gives them. Names as each agent offers them; a namespaced
// Responses tool is matched by its own name.
const CWD = process.cwd();
const KNOWN = [
  ['Bash', () => ({ command: 'ls', description: 'List the files in the folder' })],
  ['LS', () => ({ path: CWD })],
  ['Glob', () => ({ pattern: '*' })],
  ['glob', () => ({ pattern: '*' })],
  ['shell', () => ({ command: ['ls'] })],
  ['exec_command', () => ({ cmd: 'ls' })],
  ['shell_command', () => ({ command: 'ls' })],
  ['list_directory', () => ({ path: CWD })],
  ['run_shell_command', () => ({ command: 'ls', description: 'List the files' })],
];

// The function tools of a request as flat names (Responses namespaces included).
function toolNames(body) {
  const out = [];
  for (const t of body.tools || []) {
    if (t.type === 'namespace' && Array.isArray(t.tools)) {
      for (const f of t.tools) if (f.name) out.push(f.name);
    } else if (t.name) out.push(t.name);
    else if (t.function && t.function.name) out.push(t.function.name);
  }
  return out;
}

function pickTool(body) {
  const names = toolNames(body);
  for (const [name, argsOf] of KNOWN) if (names.includes(name)) return { name, args: argsOf() };
  return null;
}

// Number of tool results in the conversation, per API.
function toolResults(kind, body) {
  let n = 0;
  if (kind === 'anthropic') {
    for (const m of body.messages || []) {
      if (Array.isArray(m.content)) n += m.content.filter((b) => b.type === 'tool_result').length;
    }
  } else if (kind === 'responses') {
    if (Array.isArray(body.input)) n = body.input.filter((i) => i.type === 'function_call_output').length;
  } else {
    n = (body.messages || []).filter((m) => m.role === 'tool').length;
  }
  return n;
}

function decide(kind, body) {
  const done = toolResults(kind, body);
  const tool = pickTool(body);
  if (tool && done < toolTurns) return { tool };
  return { text: done > 0 ? `Done. I ran ${done} tool call${done > 1 ? 's' : ''} and looked at the folder.` : 'Hello.' };
}

const id = (p) => `${p}${Date.now().toString(36)}${(seq++).toString(36)}`;
const usage = { input_tokens: 10, output_tokens: 5 };

function sse(res, event, data) {
  res.write((event ? `event: ${event}\n` : '') + `data: ${JSON.stringify(data)}\n\n`);
}

function anthropic(body, res) {
  const d = decide('anthropic', body);
  const content = d.tool
    ? [{ type: 'tool_use', id: id('toolu_'), name: d.tool.name, input: d.tool.args }]
    : [{ type: 'text', text: d.text }];
  const stop = d.tool ? 'tool_use' : 'end_turn';
  const msg = { id: id('msg_'), type: 'message', role: 'assistant', model: body.model, content, stop_reason: stop,
    stop_sequence: null, usage };
  if (!body.stream) return json(res, 200, msg);
  res.writeHead(200, { 'Content-Type': 'text/event-stream' });
  sse(res, 'message_start', { type: 'message_start', message: { ...msg, content: [], stop_reason: null } });
  const b = content[0];
  if (b.type === 'text') {
    sse(res, 'content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
    sse(res, 'content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: b.text } });
  } else {
    sse(res, 'content_block_start', { type: 'content_block_start', index: 0,
      content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
    sse(res, 'content_block_delta', { type: 'content_block_delta', index: 0,
      delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) } });
  }
  sse(res, 'content_block_stop', { type: 'content_block_stop', index: 0 });
  sse(res, 'message_delta', { type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null },
    usage: { output_tokens: 5 } });
  sse(res, 'message_stop', { type: 'message_stop' });
  res.end();
}

function responses(body, res) {
  const d = decide('responses', body);
  const item = d.tool
    ? { type: 'function_call', id: id('fc_'), call_id: id('call_'), name: d.tool.name,
      arguments: JSON.stringify(d.tool.args), status: 'completed' }
    : { type: 'message', id: id('msg_'), role: 'assistant', status: 'completed',
      content: [{ type: 'output_text', text: d.text, annotations: [] }] };
  const resp = { id: id('resp_'), object: 'response', created_at: Math.floor(Date.now() / 1000), model: body.model,
    status: 'completed', output: [item],
    usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 } };
  if (!body.stream) return json(res, 200, resp);
  res.writeHead(200, { 'Content-Type': 'text/event-stream' });
  let n = 0;
  const ev = (type, data) => sse(res, type, { type, sequence_number: n++, ...data });
  ev('response.created', { response: { ...resp, status: 'in_progress', output: [] } });
  ev('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress' } });
  if (item.type === 'message') {
    ev('response.output_text.delta', { item_id: item.id, output_index: 0, content_index: 0, delta: d.text });
  } else {
    ev('response.function_call_arguments.delta', { item_id: item.id, output_index: 0, delta: item.arguments });
  }
  ev('response.output_item.done', { output_index: 0, item });
  ev('response.completed', { response: resp });
  res.end();
}

function chat(body, res) {
  const d = decide('chat', body);
  const message = d.tool
    ? { role: 'assistant', content: null, tool_calls: [{ id: id('call_'), type: 'function',
      function: { name: d.tool.name, arguments: JSON.stringify(d.tool.args) } }] }
    : { role: 'assistant', content: d.text };
  const finish = d.tool ? 'tool_calls' : 'stop';
  const base = { id: id('chatcmpl-'), created: Math.floor(Date.now() / 1000), model: body.model };
  const u = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
  if (!body.stream) {
    return json(res, 200, { ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: finish }],
      usage: u });
  }
  res.writeHead(200, { 'Content-Type': 'text/event-stream' });
  const chunk = (delta, fr) => sse(res, null, { ...base, object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: fr }] });
  if (d.tool) {
    chunk({ role: 'assistant', tool_calls: message.tool_calls.map((c, index) => ({ index, ...c })) }, null);
  } else {
    chunk({ role: 'assistant', content: d.text }, null);
  }
  chunk({}, finish);
  sse(res, null, { ...base, object: 'chat.completion.chunk', choices: [], usage: u });
  res.write('data: [DONE]\n\n');
  res.end();
}

function json(res, status, obj) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(obj));
}

const server = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => { raw += c; });
  req.on('end', () => {
    let body = null;
    try { body = raw ? JSON.parse(raw) : null; } catch { body = raw; }
    const headers = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (!/authorization|api-key|cookie/i.test(k)) headers[k] = v;
    }
    if (logPath) fs.appendFileSync(logPath, JSON.stringify({ t: Date.now(), method: req.method, path: req.url, headers, body }) + '\n');
    const path = req.url.split('?')[0];
    if (req.method === 'GET' && path.endsWith('/models')) {
      return json(res, 200, { object: 'list', data: [{ id: 'scripted', object: 'model', owned_by: 'rewind' }] });
    }
    if (req.method !== 'POST' || !body || typeof body !== 'object') return json(res, 404, { error: 'not found' });
    if (path.endsWith('/messages/count_tokens')) return json(res, 200, { input_tokens: 100 });
    if (path.endsWith('/messages')) return anthropic(body, res);
    if (path.endsWith('/responses')) return responses(body, res);
    if (path.endsWith('/chat/completions')) return chat(body, res);
    return json(res, 404, { error: 'not found' });
  });
});
server.listen(port, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
