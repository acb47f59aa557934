// Shared helpers for the node tests: paths, a gateway started through the real bin with the
// official SDK client, and process-tree inspection for the cleanup checks.
import { readdirSync, readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import { spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync, sign } from 'node:crypto';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const bin = join(root, 'bin/anygpt-discovery.js');
export const demoConfig = join(root, 'examples/demo.config.json');
export const demoFiles = join(root, 'examples/files');
export const serverPaths = {
  everything: join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'),
  filesystem: join(root, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js'),
  memory: join(root, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js'),
};

/**
 * Environment for one gateway: its own cache (catalog snapshots) and state (audit log)
 * folders, so tests never see each other's snapshots or the user's.
 */
export function isolatedEnv(env = {}) {
  // An empty home too: with no config file the gateway imports every MCP client's config it
  // finds, and a test must never serve the developer's own servers.
  const home = tempDir('anygpt-discovery-home-');
  return {
    ...process.env,
    HOME: home,
    USERPROFILE: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    APPDATA: join(home, 'AppData', 'Roaming'),
    ANYGPT_DISCOVERY_CACHE_DIR: tempDir('anygpt-discovery-cache-'),
    ANYGPT_DISCOVERY_STATE_DIR: tempDir('anygpt-discovery-state-'),
    // Tests never write into the developer's OS keychain; the keychain tests ask for it.
    ANYGPT_DISCOVERY_TOKEN_STORE: 'file',
    ...env,
  };
}

/**
 * Approve a project config as its user would, `anygpt-discovery allow FILE` through the bin,
 * from `cwd` with `env` (whose ANYGPT_DISCOVERY_STATE_DIR keeps the approval). Throws with
 * the bin's output when it fails.
 */
export function allow(file, { cwd, env }) {
  const result = spawnSync(process.execPath, [bin, 'allow', '--yes', file], { cwd, env, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`allow ${file} exited ${result.status}: ${result.stderr}${result.stdout}`);
  return result;
}

/** Folders `tempDir` made, removed when the test process exits. */
const madeDirs = [];
process.on('exit', () => {
  // Left behind, a full run leaves ~19,000 folders (gigabytes, with servers' caches) in /tmp.
  for (const dir of madeDirs) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
    } catch {
      // A folder a test made unreadable on purpose, or one still in use: left to the OS.
    }
  }
});

/** A fresh temporary folder, removed when the test process exits. */
export function tempDir(prefix = 'anygpt-discovery-test-') {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  madeDirs.push(dir);
  return dir;
}

/** Write `config` (an object) as JSON into a temp folder and return its path. */
export function writeConfig(config, dir = tempDir()) {
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify(config, null, 2));
  return path;
}

/** A stdio server entry launching a reference server by its installed path. */
export function referenceServer(name, extraArgs = [], more = {}) {
  return { name, connection: { command: process.execPath, args: [serverPaths[name], ...extraArgs] }, ...more };
}

/**
 * Start `command args` as an MCP server and connect the official client to it.
 * Returns { client, transport, stderr(): string }.
 */
export async function connect(command, args, env = {}) {
  const transport = new StdioClientTransport({
    command,
    args,
    env: isolatedEnv(env),
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const client = new Client({ name: 'anygpt-discovery-tests', version: '0.0.0' });
  await client.connect(transport);
  return { client, transport, stderr: () => stderr };
}

/** Start the gateway through the npm bin with `--config path`. */
export function startGateway(configPath, env) {
  return connect(process.execPath, [bin, '--config', configPath], env);
}

/** Call a meta-tool and parse its JSON text answer. */
export async function call(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  return { result, body: JSON.parse(result.content[0].text) };
}

/** Every live (non-zombie) descendant pid of `pid`, from /proc (Linux). */
export function descendants(pid) {
  const children = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(Number(entry));
    if (!stat || stat.state === 'Z') continue;
    if (!children.has(stat.ppid)) children.set(stat.ppid, []);
    children.get(stat.ppid).push(Number(entry));
  }
  const found = [];
  const queue = [pid];
  while (queue.length) {
    for (const child of children.get(queue.shift()) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** Whether `pid` is running (a zombie counts as gone). */
export function alive(pid) {
  const stat = procStat(pid);
  return stat !== null && stat.state !== 'Z';
}

function procStat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may hold spaces: fields start after the last ')'.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0], ppid: Number(fields[1]) };
  } catch {
    return null;
  }
}

/** Poll `predicate` every 25 ms until true or `ms` pass; returns the last value. */
export async function waitFor(predicate, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = predicate();
    if (value || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Poll the async `probe` every `every` ms until it returns a truthy value: that value, or null after `ms`. */
export async function eventually(probe, ms, every = 20) {
  const deadline = performance.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (performance.now() > deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, every));
  }
}

/** Resolve when `child` exits, with its exit code (or signal name). */
export function exited(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode ?? child.signalCode);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
}

/**
 * The SDK's stdio transport over a child we spawned ourselves, so a test can signal the
 * gateway, close its stdin and read its exit code. Framing comes from the SDK itself.
 */
class ChildTransport {
  constructor(child) {
    this.child = child;
    this.buffer = new ReadBuffer();
  }
  async start() {
    this.child.stdout.on('data', (chunk) => {
      this.buffer.append(chunk);
      for (let message; (message = this.buffer.readMessage()) !== null; ) this.onmessage?.(message);
    });
    this.child.on('close', () => this.onclose?.());
    this.child.on('error', (error) => this.onerror?.(error));
  }
  async send(message) {
    this.child.stdin.write(serializeMessage(message));
  }
  async close() {
    this.child.stdin.end();
  }
}

/**
 * Spawn the gateway bin (or `command`) ourselves and connect the official client.
 * Returns { client, child, stderr(), exit: Promise<code|signal> }.
 */
export async function spawnGateway(args, options = {}) {
  const { child, stderr } = spawnPiped(args, options);
  const exit = exited(child);
  const client = new Client({ name: 'anygpt-discovery-tests', version: '0.0.0' });
  await client.connect(new ChildTransport(child));
  return { client, child, exit, stderr };
}

/** The gateway bin (or `command`) with three pipes; `stderr()` is what it wrote there so far. */
function spawnPiped(args, { command = process.execPath, env = {} } = {}) {
  const child = spawn(command, command === process.execPath ? [bin, ...args] : args, {
    env: isolatedEnv(env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  return { child, stderr: () => stderr };
}

/**
 * Spawn the gateway bin (or `command`) and talk raw JSON-RPC lines to it, for what the
 * official client cannot send. `send` writes one line (an object is serialized); `next()`
 * resolves with the next line the gateway writes, parsed (or rejects after a while).
 */
export function rawGateway(args, options = {}) {
  const { child, stderr } = spawnPiped(args, options);
  const lines = [];
  const waiting = [];
  let pending = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    pending += chunk;
    for (let at; (at = pending.indexOf('\n')) >= 0; ) {
      const line = JSON.parse(pending.slice(0, at));
      pending = pending.slice(at + 1);
      if (waiting.length) waiting.shift()(line);
      else lines.push(line);
    }
  });
  // A gateway that stops reading (it exited, or skips an oversized line) shows in `exit`.
  child.stdin.on('error', () => {});
  const send = (message) => child.stdin.write(`${typeof message === 'string' ? message : JSON.stringify(message)}\n`);
  /** The next line, or a rejection after `ms`: a gateway that stays silent fails the test. */
  const next = (ms = 10_000) => {
    if (lines.length) return Promise.resolve(lines.shift());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.splice(waiting.indexOf(deliver), 1);
        reject(new Error(`no answer within ${ms} ms`));
      }, ms);
      const deliver = (line) => {
        clearTimeout(timer);
        resolve(line);
      };
      waiting.push(deliver);
    });
  };
  /** The MCP handshake, as a client does it. */
  const initialize = async () => {
    send({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
    });
    const answer = await next();
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return answer;
  };
  return { child, send, next, initialize, exit: exited(child), stderr };
}

/**
 * `anygpt-discovery serve --http 127.0.0.1:0 --config <servers>`; resolves once it prints the
 * address it bound. Returns { url, base, child, exit, stderr() }.
 */
export async function serveHttp(servers, { discovery = {}, listen = '127.0.0.1:0' } = {}) {
  const config = writeConfig({ discovery: { servers, ...discovery } });
  const child = spawn(process.execPath, [bin, 'serve', '--http', listen, '--config', config], {
    env: isolatedEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  return { ...(await listening(child)), stdout: () => stdout };
}

/**
 * A `serve --http` process once it printed its address (its stderr piped): { url, base, child,
 * exit, stderr() }. Rejects when it exits first or says nothing within 20 s.
 */
export async function listening(child) {
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exit = exited(child);
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no address printed:\n${stderr}`)), 20_000);
    child.stderr.on('data', () => {
      const found = /listening on (http:\/\/\S+\/mcp)/.exec(stderr);
      if (found) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
    exit.then((code) => reject(new Error(`exited ${code} before listening:\n${stderr}`)));
  });
  return { url, base: url.replace(/\/mcp$/, ''), child, exit, stderr: () => stderr };
}

/** An OAuth issuer's RS256 signing key made for a test: { kid, privateKey, jwk } (the public JWK its JWK Set publishes). */
export function signingKey(kid) {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid, privateKey, jwk: { ...publicKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'RS256' } };
}

/** A JWT of `claims`, signed RS256 with `key` (from `signingKey`). */
export function signedJwt(key, claims) {
  const b64url = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const signed = `${b64url({ alg: 'RS256', typ: 'JWT', kid: key.kid })}.${b64url(claims)}`;
  return `${signed}.${sign('sha256', Buffer.from(signed), key.privateKey).toString('base64url')}`;
}

/**
 * Resolves with the match once `child` printed `pattern` on `stream` ('stdout' or 'stderr');
 * rejects with what it printed when it exits first or says nothing within 15 s.
 */
export function printedMatch(child, stream, pattern) {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`not started: ${output}`)), 15_000);
    child[stream].on('data', (chunk) => {
      output += chunk;
      const found = pattern.exec(output);
      if (found) {
        clearTimeout(timer);
        resolve(found);
      }
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${output}`)));
  });
}

/**
 * The OAuth fixture (`__test__/fixtures/oauth-server.mjs`: an authorization server and the MCP
 * server it protects) with `env`, once it listens: { child, base, url, admin(what) }.
 */
export async function startOAuthServer(env = {}) {
  const child = spawn(process.execPath, [join(root, '__test__/fixtures/oauth-server.mjs')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [, port] = await printedMatch(child, 'stdout', /listening (\d+)/);
  const base = `http://127.0.0.1:${port}`;
  const admin = async (what) => (await fetch(`${base}/admin/${what}`)).json();
  return { child, base, url: `${base}/mcp`, admin };
}

/** A free loopback port right now (for a server the test starts on it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/**
 * server-everything over streamable HTTP (`/mcp`) or legacy SSE (`/sse`) on `port` (a free one
 * by default); resolves once it listens. Returns { child, port, url }.
 */
export async function startHttpEverything(mode = 'streamableHttp', port = undefined) {
  port ??= await freePort();
  const child = spawn(process.execPath, [serverPaths.everything, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise((resolve, reject) => {
    let output = '';
    child.stderr.on('data', (chunk) => {
      output += chunk;
      if (/listening on port|running on port/i.test(output)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`server-everything exited with ${code}: ${output}`)));
  });
  return { child, port, url: `http://127.0.0.1:${port}/${mode === 'sse' ? 'sse' : 'mcp'}` };
}

/**
 * A 2026-07-28 request: no initialize, version and capabilities in `_meta` (`params._meta`
 * adds to or overrides them), headers to match.
 */
export function raw2026(url, method, params = {}, headers = {}, signal = undefined) {
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'raw-2026', version: '0' },
    'io.modelcontextprotocol/clientCapabilities': {},
    ...params._meta,
  };
  const name = { 'tools/call': params.name, 'prompts/get': params.name, 'resources/read': params.uri }[method];
  const extra = name ? { 'Mcp-Name': name } : {};
  return fetch(url, {
    method: 'POST',
    signal,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2026-07-28',
      'Mcp-Method': method,
      ...extra,
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: meta } }),
  });
}

/** The JSON-RPC answer in a response body (JSON, or the last `data:` of an SSE stream). */
export async function answerOf(response) {
  const text = await response.text();
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return JSON.parse(text);
  const data = text
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trim())
    .filter(Boolean);
  return JSON.parse(data.at(-1));
}
