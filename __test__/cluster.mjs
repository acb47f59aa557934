// Replicas on loopback, for the replica test and bench/replicas.mjs: a real redis-server (the
// store they share), `anygpt-discovery serve --http` replicas (the native binary, so that a
// SIGKILL kills the gateway itself) each with its own HOME, cache, state and audit log, and a
// real haproxy in front of them, health-checking `/readyz`.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findCommand } from '../scripts/debian.mjs';
import { hostTriple } from '../scripts/host.mjs';
import { answerOf, exited, freePort, isolatedEnv, listening, raw2026, root, tempDir } from './helpers.mjs';

/** The debug binary `node scripts/build.mjs` makes (the one the tests run). */
export const debugBinary = join(root, 'target', hostTriple(), 'debug/anygpt-discovery');
export const fixtureServer = join(root, '__test__/fixtures/replica-server.mjs');

/** Every process started here: killed when this process exits, so a failed run leaves none. */
const started = new Set();
process.on('exit', () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
/** `child`, remembered until it exits. */
function tracked(child) {
  started.add(child);
  child.once('exit', () => started.delete(child));
  return child;
}

/** The path of `command`, or an error naming the Debian package (scripts/test.mjs installs it). */
function command(name) {
  const path = findCommand(name);
  if (!path) throw new Error(`${name} is not installed: run \`apt-get install -y ${name}\` (npm test does, as root)`);
  return path;
}

/** Resolve once `child`'s stderr or stdout matches `pattern`; reject when it exits first or after `ms`. */
function printed(child, pattern, what, ms = 20_000) {
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: nothing matching ${pattern} within ${ms} ms:\n${output}`)), ms);
    const read = (chunk) => {
      output += chunk;
      if (pattern.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', read);
    child.stderr?.on('data', read);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code ?? signal}):\n${output}`));
    });
  });
}

/**
 * A redis-server on 127.0.0.1:`port` (a free one by default), nothing saved to disk.
 * `{ port, url, child, stop() }`; `stop()` SIGKILLs it (the store going away without a word).
 */
export async function startRedis(port = undefined) {
  port ??= await freePort();
  const dir = tempDir('anygpt-redis-');
  const child = tracked(spawn(
    command('redis-server'),
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'yes'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  ));
  await printed(child, /Ready to accept connections/, `redis-server on port ${port}`);
  const exit = exited(child);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    child,
    async stop() {
      child.kill('SIGKILL');
      await exit;
    },
  };
}

/**
 * A config every replica shares: `servers`, the store at `storeUrl` (none when null), the audit
 * log with arguments, and `publicUrl` the load balancer's URL (the `Host` its clients send).
 */
export function replicaConfig({ servers, storeUrl, publicUrl, discovery = {} }) {
  const config = {
    discovery: {
      servers,
      audit: { includeArguments: true },
      http: { publicUrl },
      ...(storeUrl ? { store: { url: storeUrl, prefix: 'replicas-test' } } : {}),
      ...discovery,
    },
  };
  const path = join(tempDir('anygpt-replica-config-'), 'config.json');
  writeFileSync(path, JSON.stringify(config, null, 2));
  return path;
}

/** The replica fixture server (see fixtures/replica-server.mjs) as a config entry. */
export function fixtureEntry(name, options = {}) {
  const args = [fixtureServer];
  for (const [key, value] of Object.entries(options)) args.push(`--${key}`, String(value));
  return { name, connection: { command: process.execPath, args } };
}

/**
 * `binary serve --http 127.0.0.1:<port> --config <config>` with an empty HOME, cache and state
 * of its own; resolves once it listens. `{ name, port, base, url, child, pid, exit, env,
 * audit, stderr(), spawnedAt }` (`spawnedAt`: performance.now() just before the spawn).
 */
export async function startReplica(name, config, { binary = debugBinary, port = undefined, env = {} } = {}) {
  port ??= await freePort();
  const replicaEnv = isolatedEnv({ ANYGPT_LOG: 'warn', ...env });
  const spawnedAt = performance.now();
  const child = tracked(
    spawn(binary, ['serve', '--http', `127.0.0.1:${port}`, '--config', config], {
      env: replicaEnv,
      stdio: ['ignore', 'ignore', 'pipe'],
    }),
  );
  const started = await listening(child);
  return {
    ...started,
    name,
    port,
    pid: child.pid,
    env: replicaEnv,
    spawnedAt,
    audit: join(replicaEnv.ANYGPT_DISCOVERY_STATE_DIR, 'audit.jsonl'),
  };
}

/** `/readyz` of a replica: `{ status, body }` (status 0 when it does not answer). */
export async function readyz(base) {
  try {
    const response = await fetch(`${base}/readyz`);
    return { status: response.status, body: await response.json() };
  } catch (error) {
    return { status: 0, body: { error: String(error) } };
  }
}

/** Resolve once `/readyz` of `base` answers 200 (its body), or throw with the last answer after `ms`. */
export async function waitReady(base, ms = 60_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const last = await readyz(base);
    if (last.status === 200) return last.body;
    if (Date.now() > deadline) throw new Error(`${base}/readyz not 200 within ${ms} ms: ${JSON.stringify(last)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Stop a replica: SIGTERM, SIGKILL after 5 s. */
export async function stopReplica(replica) {
  if (replica.child.exitCode !== null || replica.child.signalCode !== null) return;
  replica.child.kill('SIGTERM');
  const timer = setTimeout(() => replica.child.kill('SIGKILL'), 5_000);
  await replica.exit;
  clearTimeout(timer);
}

/**
 * haproxy on a free port in front of `backends` ({ name, port }): round robin, each checked
 * with `GET /readyz` every 100 ms (down after 2 failures, up after 1 success), a connection
 * refused retried on another replica (`option redispatch 1`); a request already sent is never
 * retried (the default `retry-on conn-failure`), so a call is not run twice by haproxy. Every
 * answer, haproxy's own errors too, says in `X-Replica` which replica it went to. Server-side
 * connections close after each answer (`http-server-close`): a kept-alive one to a replica
 * killed meanwhile would fail the next request sent on it.
 * Listens on `port` (a free one by default: the replicas' `publicUrl` names it).
 * `{ url, port, child, states(), waitUp(names, ms), stop() }`.
 */
export async function startHaproxy(backends, port = undefined) {
  port ??= await freePort();
  const statsPort = await freePort();
  const dir = tempDir('anygpt-haproxy-');
  const cfg = join(dir, 'haproxy.cfg');
  writeFileSync(
    cfg,
    [
      'global',
      '  maxconn 4096',
      'defaults',
      '  mode http',
      '  timeout connect 1s',
      '  timeout client 120s',
      '  timeout server 120s',
      '  timeout http-request 10s',
      // A debug build on a busy machine may take more than `inter` to answer.
      '  timeout check 2s',
      '  retries 3',
      '  option redispatch 1',
      '  option http-server-close',
      'frontend mcp',
      `  bind 127.0.0.1:${port}`,
      '  default_backend replicas',
      'backend replicas',
      '  balance roundrobin',
      '  option httpchk GET /readyz',
      '  http-check expect status 200',
      '  default-server inter 100ms fastinter 100ms downinter 100ms fall 2 rise 1',
      '  http-after-response set-header X-Replica %[srv_name]',
      ...backends.map((b) => `  server ${b.name} 127.0.0.1:${b.port} check`),
      'listen stats',
      `  bind 127.0.0.1:${statsPort}`,
      '  stats enable',
      '  stats uri /stats',
      '',
    ].join('\n'),
  );
  const child = tracked(spawn(command('haproxy'), ['-db', '-f', cfg], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exit = exited(child);
  const stats = `http://127.0.0.1:${statsPort}/stats;csv`;
  /** Each backend server's state as haproxy sees it: { name: 'UP' | 'DOWN' | … }. */
  const states = async () => {
    const text = await (await fetch(stats)).text();
    const [header, ...rows] = text.trim().split('\n');
    const columns = header.replace(/^# /, '').split(',');
    const at = (name) => columns.indexOf(name);
    const found = {};
    for (const row of rows.map((r) => r.split(','))) {
      if (row[at('pxname')] === 'replicas' && !['FRONTEND', 'BACKEND'].includes(row[at('svname')])) {
        found[row[at('svname')]] = row[at('status')];
      }
    }
    return found;
  };
  // Listening once the stats page answers.
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await states();
      break;
    } catch (error) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`haproxy did not start: ${error}\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    port,
    child,
    output: () => output,
    states,
    /** Resolve once haproxy reports every one of `names` UP (and only those), or throw after `ms`. */
    async waitUp(names, ms = 30_000) {
      const until = Date.now() + ms;
      for (;;) {
        const now = await states();
        const up = Object.keys(now).filter((n) => now[n] === 'UP');
        if (up.sort().join() === [...names].sort().join()) return now;
        if (Date.now() > until) throw new Error(`haproxy reports ${JSON.stringify(now)}, waiting for ${names.join(', ')} up`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async stop() {
      child.kill('SIGTERM');
      await exit;
    },
  };
}

/**
 * One sessionless 2026-07-28 `tools/call` of a meta-tool at `url`: `{ replica, status, answer,
 * body }` — the replica haproxy chose (`X-Replica`, null when not through haproxy), the HTTP
 * status, the JSON-RPC answer (null when none came), and the tool's text parsed as JSON when
 * it is JSON. A failure to connect or read is thrown.
 */
export async function metaCall(url, tool, args = {}) {
  const response = await raw2026(url, 'tools/call', { name: tool, arguments: args });
  const replica = response.headers.get('x-replica');
  if (response.status !== 200) {
    await response.arrayBuffer().catch(() => {});
    return { replica, status: response.status, answer: null, body: null };
  }
  const answer = await answerOf(response);
  const text = answer.result?.content?.[0]?.text;
  let body = null;
  try {
    body = text === undefined ? null : JSON.parse(text);
  } catch {
    body = text;
  }
  return { replica, status: response.status, answer, body };
}

/** Every audit entry of the log at `path` (none when it does not exist). */
export function auditEntries(path) {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

/** The record file of the fixture as `[{ id, pid }]` (none when it does not exist). */
export function recorded(path) {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, pid] = line.split(' ');
      return { id, pid: Number(pid) };
    });
}

/** The value of the Prometheus sample `name` (with `labels` text, e.g. `{server="x"}`), or null. */
export async function metric(base, name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  let total = null;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([^\s{]+)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (match && match[1] === name) total = (total ?? 0) + Number(match[3]);
  }
  return total;
}
