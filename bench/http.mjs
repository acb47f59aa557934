#!/usr/bin/env node
// Team mode against stdio (#26): many clients on one `serve --http` gateway, and the memory of
// many editor windows served by one process instead of one gateway each.
//
//   node scripts/build.mjs [--release]      # the native binary this measures
//   node bench/http.mjs [--clients 200] [--calls 50] [--windows 10] [--binary PATH]
//
// 1. Latency and throughput: `--clients` official SDK clients over streamable HTTP, each making
//    `--calls` calls one after another, all clients at once; first `search_tools`, then
//    `execute_tool` of server-everything's `echo`. The same number of calls over stdio go
//    through one SDK client (stdio has one client per gateway), `--clients` in flight at once.
//    p50/p99 per call, calls per second, and the RSS of the gateway's process tree after.
// 2. Memory: `--windows` stdio gateways (one per editor window, each with its own
//    server-everything) against one HTTP gateway with `--windows` clients connected.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { hostTriple } from '../scripts/host.mjs';

const root = join(import.meta.dirname, '..');
const option = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const CLIENTS = Number(option('--clients', 200));
const CALLS = Number(option('--calls', 50));
const WINDOWS = Number(option('--windows', 10));
const BINARY = option('--binary', join(root, 'target', hostTriple(), 'release/anygpt-discovery'));

const home = mkdtempSync(join(tmpdir(), 'anygpt-bench-http-'));
const config = join(home, 'config.json');
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
writeFileSync(config, JSON.stringify({ discovery: { servers: [{ name: 'everything', connection: { command: process.execPath, args: [everything] } }] } }));
const env = {
  ...process.env,
  HOME: home,
  XDG_CONFIG_HOME: join(home, '.config'),
  ANYGPT_DISCOVERY_CACHE_DIR: join(home, 'cache'),
  ANYGPT_DISCOVERY_STATE_DIR: join(home, 'state'),
  ANYGPT_DISCOVERY_TOKEN_STORE: 'file',
  ANYGPT_LOG: 'warn',
};

/** RSS in MiB of `pid` and every descendant. */
function treeRss(pid) {
  const parents = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {}
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) for (const [child, parent] of parents) if (parent === tree[i]) tree.push(child);
  let kib = 0;
  for (const p of tree) {
    try {
      kib += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
    } catch {}
  }
  return kib / 1024;
}

async function startHttp() {
  const child = spawn(BINARY, ['serve', '--http', '127.0.0.1:0', '--config', config], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  for (let i = 0; i < 400 && !/listening on/.test(stderr); i++) await new Promise((r) => setTimeout(r, 25));
  const url = /listening on (\S+)/.exec(stderr)?.[1];
  if (!url) throw new Error(`no address:\n${stderr}`);
  return { child, url };
}

async function httpClient(url) {
  const client = new Client({ name: 'bench', version: '0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

async function stdioClient() {
  const transport = new StdioClientTransport({ command: BINARY, args: ['--config', config], env, stderr: 'ignore' });
  const client = new Client({ name: 'bench', version: '0' });
  await client.connect(transport);
  return { client, pid: transport.pid };
}

const CALL = {
  search: { name: 'search_tools', arguments: { query: 'echo a message' } },
  echo: { name: 'execute_tool', arguments: { server: 'everything', tool: 'echo', arguments: { message: 'hi' } } },
};

/** `lanes` loops of `CALLS` calls each, on `clientOf(lane)`; per-call latencies and throughput. */
async function load(clientOf, lanes, call) {
  const latencies = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      const client = clientOf(lane);
      for (let i = 0; i < CALLS; i++) {
        const t = performance.now();
        const result = await client.callTool(call, undefined, { timeout: 120_000 });
        if (result.isError) throw new Error(JSON.stringify(result));
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))].toFixed(1);
  return { p50: at(0.5), p99: at(0.99), perSecond: Math.round(latencies.length / seconds) };
}

async function main() {
  const rows = [];
  const http = await startHttp();
  const clients = [];
  for (let i = 0; i < CLIENTS; i++) clients.push(await httpClient(http.url));
  await clients[0].callTool(CALL.echo); // everything connected
  for (const kind of ['search', 'echo']) {
    const r = await load((lane) => clients[lane], CLIENTS, CALL[kind]);
    rows.push(`| HTTP, ${CLIENTS} clients | ${kind} | ${r.p50} | ${r.p99} | ${r.perSecond} | ${treeRss(http.child.pid).toFixed(0)} |`);
    console.error(rows.at(-1));
  }
  await Promise.all(clients.map((c) => c.close()));
  http.child.kill('SIGTERM');

  const stdio = await stdioClient();
  await stdio.client.callTool(CALL.echo);
  for (const kind of ['search', 'echo']) {
    const r = await load(() => stdio.client, CLIENTS, CALL[kind]);
    rows.push(`| stdio, 1 client, ${CLIENTS} in flight | ${kind} | ${r.p50} | ${r.p99} | ${r.perSecond} | ${treeRss(stdio.pid).toFixed(0)} |`);
    console.error(rows.at(-1));
  }
  await stdio.client.close();

  // Many windows: one gateway each, against one shared HTTP gateway.
  const windows = [];
  for (let i = 0; i < WINDOWS; i++) windows.push(await stdioClient());
  await Promise.all(windows.map((w) => w.client.callTool(CALL.echo)));
  const stdioRss = windows.reduce((sum, w) => sum + treeRss(w.pid), 0);
  await Promise.all(windows.map((w) => w.client.close()));
  const shared = await startHttp();
  const sharedClients = [];
  for (let i = 0; i < WINDOWS; i++) sharedClients.push(await httpClient(shared.url));
  await Promise.all(sharedClients.map((c) => c.callTool(CALL.echo)));
  const httpRss = treeRss(shared.child.pid);
  await Promise.all(sharedClients.map((c) => c.close()));
  shared.child.kill('SIGTERM');

  console.log(`binary: ${BINARY}; ${CLIENTS} clients × ${CALLS} calls each\n`);
  console.log('| transport | call | p50 ms | p99 ms | calls/s | RSS MiB (gateway + servers) |');
  console.log('|---|---|---|---|---|---|');
  console.log(rows.join('\n'));
  console.log(`\n${WINDOWS} editor windows: ${WINDOWS} stdio gateways ${stdioRss.toFixed(0)} MiB in all; one HTTP gateway with ${WINDOWS} clients ${httpRss.toFixed(0)} MiB`);
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
