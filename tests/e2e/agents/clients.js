// How each coding agent is run against a server: its command line, environment and config files (the settings
// docs/clients.md lists). Every client gets a fresh HOME in a temporary folder, telemetry, update checks and
// other traffic off (the test machine reaches no network but the npm registry), and a hard timeout.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(HERE, 'node_modules', '.bin');

// The pinned versions (package.json).
export const VERSIONS = JSON.parse(fs.readFileSync(path.join(HERE, 'package.json'), 'utf8')).dependencies;

// A temporary HOME and working folder with two small files to look at.
export function makeSandbox(name) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `rewind-agent-${name}-`));
  const home = path.join(root, 'home');
  const work = path.join(root, 'work');
  fs.mkdirSync(home, { recursive: true });
  fs.mkdirSync(work, { recursive: true });
  fs.writeFileSync(path.join(work, 'notes.txt'), 'hello\n');
  fs.writeFileSync(path.join(work, 'main.py'), 'print(1)\n');
  return { root, home, work };
}

const COMMON_ENV = {
  NO_UPDATE_NOTIFIER: '1',
  NO_COLOR: '1',
  CI: '1',
};

// Each client: `setup(sandbox, base, prompt, maxTokens)` writes its config and returns {cmd, args, env}. `base` is
// the server's origin (http://127.0.0.1:PORT); `maxTokens`, when given, caps each answer where the client lets it
// be set (Claude Code and qwen-code then fail on an answer cut at the cap, Codex on any cut answer).
export const CLIENTS = {
  claude: {
    package: '@anthropic-ai/claude-code',
    setup(sb, base, prompt, maxTokens) {
      return {
        cmd: path.join(BIN, 'claude'),
        args: ['-p', prompt, '--model', 'rewind-demo'],
        env: {
          ANTHROPIC_BASE_URL: base,
          ANTHROPIC_API_KEY: 'rewind',
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
          DISABLE_AUTOUPDATER: '1',
          DISABLE_TELEMETRY: '1',
          DISABLE_ERROR_REPORTING: '1',
          ...(maxTokens ? { CLAUDE_CODE_MAX_OUTPUT_TOKENS: String(maxTokens) } : {}),
        },
      };
    },
  },
  codex: {
    package: '@openai/codex',
    setup(sb, base, prompt) {
      const codexHome = path.join(sb.home, '.codex');
      fs.mkdirSync(codexHome, { recursive: true });
      fs.writeFileSync(path.join(codexHome, 'config.toml'), [
        'model = "rewind-demo"',
        'model_provider = "rewind"',
        'check_for_update_on_startup = false',
        '',
        '[model_providers.rewind]',
        'name = "rewind"',
        `base_url = "${base}/v1"`,
        'wire_api = "responses"',
        'env_key = "REWIND_API_KEY"',
        'request_max_retries = 0',
        'stream_max_retries = 0',
        '',
        '[analytics]',
        'enabled = false',
        '',
      ].join('\n'));
      return {
        cmd: path.join(BIN, 'codex'),
        args: ['exec', '--skip-git-repo-check', prompt],
        env: { CODEX_HOME: codexHome, REWIND_API_KEY: 'rewind' },
      };
    },
  },
  qwen: {
    package: '@qwen-code/qwen-code',
    setup(sb, base, prompt, maxTokens) {
      const qwenHome = path.join(sb.home, '.qwen');
      fs.mkdirSync(qwenHome, { recursive: true });
      fs.writeFileSync(path.join(qwenHome, 'settings.json'), JSON.stringify({
        general: { enableAutoUpdate: false },
        privacy: { usageStatisticsEnabled: false },
        telemetry: { enabled: false },
        memory: { enableManagedAutoMemory: false, enableManagedAutoDream: false, enableAutoSkill: false },
      }, null, 2));
      return {
        cmd: path.join(BIN, 'qwen'),
        args: ['-p', prompt, '--auth-type', 'openai'],
        env: {
          QWEN_HOME: qwenHome,
          OPENAI_BASE_URL: `${base}/v1`,
          OPENAI_API_KEY: 'rewind',
          OPENAI_MODEL: 'rewind-demo',
          QWEN_USAGE_STATISTICS_ENABLED: '0',
          QWEN_TELEMETRY_ENABLED: '0',
          ...(maxTokens ? { QWEN_CODE_MAX_OUTPUT_TOKENS: String(maxTokens) } : {}),
        },
      };
    },
  },
};

// Whether the client's package is installed and its binary runs (`--version`).
export async function clientAvailable(name) {
  const { cmd } = CLIENTS[name].setup(makeSandbox(`probe-${name}`), 'http://127.0.0.1:9', 'x', 16);
  if (!fs.existsSync(cmd)) return false;
  const r = await run(cmd, ['--version'], {}, process.cwd(), 60000);
  return r.code === 0;
}

// Runs one client's non-interactive mode; resolves {code, stdout, stderr, ms} (code null: killed at `timeoutMs`).
export function runClient(name, base, prompt, { maxTokens = 0, timeoutMs = 120000 } = {}) {
  const sb = makeSandbox(name);
  const { cmd, args, env } = CLIENTS[name].setup(sb, base, prompt, maxTokens);
  return run(cmd, args, { HOME: sb.home, ...COMMON_ENV, ...env }, sb.work, timeoutMs);
}

function run(cmd, args, env, cwd, timeoutMs) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const p = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('error', (e) => { clearTimeout(timer); resolve({ code: -1, stdout, stderr: stderr + String(e), ms: 0 }); });
    p.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr, ms: Date.now() - t0 }); });
  });
}

// Installs the pinned clients once: npm ci from package-lock.json, else npm install (npm 11's ci refuses this
// lock file for the platform packages of optional dependencies it leaves out; the versions are exact either
// way); false when both fail (no registry).
export async function installClients() {
  if (fs.existsSync(path.join(HERE, 'node_modules', '.rewind-installed'))) return true;
  let r = await run('npm', ['ci', '--no-audit', '--no-fund'], {}, HERE, 600000);
  if (r.code !== 0) r = await run('npm', ['install', '--no-audit', '--no-fund'], {}, HERE, 600000);
  if (r.code !== 0) {
    process.stderr.write(`npm install of the agents failed:\n${r.stderr.slice(-2000)}\n`);
    return false;
  }
  fs.writeFileSync(path.join(HERE, 'node_modules', '.rewind-installed'), '');
  return true;
}
