#!/usr/bin/env node
// Team mode against stdio (#26): many clients on one `serve --http` gateway, and the memory of
// many editor windows served by one process instead of one gateway each.
//
//   node scripts/build.mjs [--release]      # the native binary this measures
//   node bench/http.mjs [--clients 200] [--calls 50] [--windows 10] [--binary [LABEL=]PATH]...
//
// 1. Latency and throughput: `--clients` official SDK clients over streamable HTTP, each making
//    `--calls` calls one after another, all clients at once; first `search_tools`, then
//    `execute_tool` of server-everything's `echo`. The same number of calls over stdio go
//    through one SDK client (stdio has one client per gateway), `--clients` in flight at once.
//    p50/p99 per call, calls per second, the CPU time per call of the gateway's own process and
//    of this process (every client: 1000 / that is the most calls a second one core of clients
//    can make), and the RSS of the gateway's process tree after.
//    `--raw` adds the same HTTP load from minimal clients (node:http with keep-alive, one POST
//    a call, the SSE answer read as text): what the gateway serves when the SDK's own cost
//    per call is out of the way.
// 2. Memory: `--windows` stdio gateways (one per editor window, each with its own
//    server-everything) against one HTTP gateway with `--windows` clients connected.
//
// Several `--binary` options measure each binary in turn, in one run (say, the commit before a
// change and after it); rows are labelled with LABEL (default: the file name).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
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
const RAW = process.argv.includes('--raw');
const BINARIES = process.argv.flatMap((arg, i) => (arg === '--binary' ? [process.argv[i + 1]] : []));
if (BINARIES.length === 0) BINARIES.push(join(root, 'target', hostTriple(), 'release/anygpt-discovery'));
/** `LABEL=PATH` or `PATH` → { label, path }. */
const named = (arg) => {
  const at = arg.indexOf('=');
  return at > 0 ? { label: arg.slice(0, at), path: arg.slice(at + 1) } : { label: basename(arg), path: arg };
};

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

/** CPU seconds (user + system) `pid` has used so far. */
function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  // utime and stime, fields 14 and 15 of stat(5), in clock ticks (100 a second on Linux).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function startHttp(binary) {
  const child = spawn(binary, ['serve', '--http', '127.0.0.1:0', '--config', config], { env, stdio: ['ignore', 'ignore', 'pipe'] });
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

async function stdioClient(binary) {
  const transport = new StdioClientTransport({ command: binary, args: ['--config', config], env, stderr: 'ignore' });
  const client = new Client({ name: 'bench', version: '0' });
  await client.connect(transport);
  return { client, pid: transport.pid };
}

const CALL = {
  search: { name: 'search_tools', arguments: { query: 'echo a message' } },
  echo: { name: 'execute_tool', arguments: { server: 'everything', tool: 'echo', arguments: { message: 'hi' } } },
};

/**
 * A minimal client of our own: node:http with keep-alive, one POST a call (protocol 2025-11-25,
 * sessionless), the SSE answer read whole. No SDK: what the gateway serves when the client's
 * cost per call is small.
 */
function rawClient(url) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let id = 0;
  return {
    callTool(call) {
      const body = JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: call });
      return new Promise((resolve, reject) => {
        const req = request(
          url,
          {
            method: 'POST',
            agent,
            headers: {
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'mcp-protocol-version': '2025-11-25',
              'content-length': Buffer.byteLength(body),
            },
          },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (chunk) => (text += chunk));
            res.on('end', () => {
              const data = /^data: (\{.*\})$/m.exec(text)?.[1];
              const message = data && JSON.parse(data);
              if (res.statusCode !== 200 || !message?.result) reject(new Error(`${res.statusCode}: ${text.slice(0, 500)}`));
              else resolve(message.result);
            });
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    },
    close() {
      agent.destroy();
    },
  };
}

/**
 * `lanes` loops of `CALLS` calls each, on `clientOf(lane)`; per-call latencies, throughput,
 * and the CPU time per call of `gateway` and of this process (every client) meanwhile.
 */
async function load(clientOf, lanes, call, gateway) {
  const latencies = [];
  const started = performance.now();
  const client0 = process.cpuUsage();
  const gateway0 = cpuSeconds(gateway);
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
  const client = process.cpuUsage(client0);
  const perCall = (cpu) => ((1000 * cpu) / latencies.length).toFixed(2);
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))].toFixed(1);
  return {
    p50: at(0.5),
    p99: at(0.99),
    perSecond: Math.round(latencies.length / seconds),
    gatewayCpu: perCall(cpuSeconds(gateway) - gateway0),
    clientCpu: perCall((client.user + client.system) / 1e6),
  };
}

const row = (label, transport, kind, r, rss) =>
  `| ${label} | ${transport} | ${kind} | ${r.p50} | ${r.p99} | ${r.perSecond} | ${r.gatewayCpu} | ${r.clientCpu} | ${rss.toFixed(0)} |`;

/** Every measurement of one binary: table rows, and the windows line. */
async function measure({ label, path }) {
  const rows = [];
  const report = (line) => {
    rows.push(line);
    console.error(line);
  };
  const http = await startHttp(path);
  const clients = [];
  for (let i = 0; i < CLIENTS; i++) clients.push(await httpClient(http.url));
  await clients[0].callTool(CALL.echo); // everything connected
  for (const kind of ['search', 'echo']) {
    const r = await load((lane) => clients[lane], CLIENTS, CALL[kind], http.child.pid);
    report(row(label, `HTTP, ${CLIENTS} SDK clients`, kind, r, treeRss(http.child.pid)));
  }
  await Promise.all(clients.map((c) => c.close()));
  if (RAW) {
    const raw = Array.from({ length: CLIENTS }, () => rawClient(http.url));
    for (const kind of ['search', 'echo']) {
      const r = await load((lane) => raw[lane], CLIENTS, CALL[kind], http.child.pid);
      report(row(label, `HTTP, ${CLIENTS} raw clients`, kind, r, treeRss(http.child.pid)));
    }
    for (const c of raw) c.close();
  }
  http.child.kill('SIGTERM');

  const stdio = await stdioClient(path);
  await stdio.client.callTool(CALL.echo);
  for (const kind of ['search', 'echo']) {
    const r = await load(() => stdio.client, CLIENTS, CALL[kind], stdio.pid);
    report(row(label, `stdio, 1 client, ${CLIENTS} in flight`, kind, r, treeRss(stdio.pid)));
  }
  await stdio.client.close();

  // Many windows: one gateway each, against one shared HTTP gateway.
  const windows = [];
  for (let i = 0; i < WINDOWS; i++) windows.push(await stdioClient(path));
  await Promise.all(windows.map((w) => w.client.callTool(CALL.echo)));
  const stdioRss = windows.reduce((sum, w) => sum + treeRss(w.pid), 0);
  await Promise.all(windows.map((w) => w.client.close()));
  const shared = await startHttp(path);
  const sharedClients = [];
  for (let i = 0; i < WINDOWS; i++) sharedClients.push(await httpClient(shared.url));
  await Promise.all(sharedClients.map((c) => c.callTool(CALL.echo)));
  const httpRss = treeRss(shared.child.pid);
  await Promise.all(sharedClients.map((c) => c.close()));
  shared.child.kill('SIGTERM');
  const windowsLine = `${label}: ${WINDOWS} editor windows: ${WINDOWS} stdio gateways ${stdioRss.toFixed(0)} MiB in all; one HTTP gateway with ${WINDOWS} clients ${httpRss.toFixed(0)} MiB`;
  console.error(windowsLine);
  return { rows, windowsLine };
}

async function main() {
  const measured = [];
  for (const binary of BINARIES.map(named)) measured.push({ binary, ...(await measure(binary)) });
  for (const { binary } of measured) console.log(`${binary.label}: ${binary.path}`);
  console.log(`${CLIENTS} clients × ${CALLS} calls each; CPU time per call of the gateway's process alone (not the servers behind it) and of this one (every client)\n`);
  console.log('| binary | transport | call | p50 ms | p99 ms | calls/s | gateway CPU ms/call | client CPU ms/call | RSS MiB (gateway + servers) |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  console.log(measured.flatMap((m) => m.rows).join('\n'));
  console.log('');
  for (const m of measured) console.log(m.windowsLine);
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
