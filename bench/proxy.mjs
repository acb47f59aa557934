#!/usr/bin/env node
// execute_tool overhead and startup, measured side by side in one run.
//
//   npm run build            # release addon + binary (fat LTO); numbers from debug builds are meaningless,
//                            # and `npm test` leaves a debug addon behind: build again after it
//   node bench/proxy.mjs [--calls 2000] [--rounds 5] [--starts 10] [--native PATH] [--compare PATH]
//
// Proxy: the official SDK client calls server-everything's `echo` (a) directly over stdio,
// (b) through the npm bin (Node + addon) and (c) through the native binary (and (d) through a
// second native build with --compare, for an A/B), in interleaved rounds so machine noise
// hits all alike. Reports p50/p99 per call, the overhead, and the CPU time the process the
// client talks to spent per call (Linux /proc; the server itself for `direct`).
//
// Startup: spawn → `initialize` answered, and spawn → first `search_tools` that finds a tool,
// for the demo config (three real servers), without a snapshot (fresh cache dir) and with one.
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { hostTriple } from '../scripts/host.mjs';

const root = join(import.meta.dirname, '..');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const CALLS = arg('--calls', 2000);
const ROUNDS = arg('--rounds', 5);
const STARTS = arg('--starts', 10);

const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const option = (name) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
// --native PATH: another build of the binary (e.g. target/<triple>/profiling/anygpt-discovery).
const native = option('--native') ?? join(root, 'target', hostTriple(), 'release/anygpt-discovery');
// --compare PATH: a second native build measured in the same rounds (an A/B, e.g. a build of
// the previous commit copied aside).
const compare = option('--compare');
const skipNpm = process.argv.includes('--native-only');
if (!existsSync(native)) throw new Error(`${native} is missing: run \`npm run build\` first`);
const demo = join(root, 'examples/demo.config.json');
const echoOnly = join(mkdtempSync(join(tmpdir(), 'anygpt-bench-')), 'echo.json');
await import('node:fs').then(({ writeFileSync }) =>
  writeFileSync(echoOnly, JSON.stringify({ discovery: { audit: { enabled: false }, servers: [{ name: 'everything', connection: { command: process.execPath, args: [everything, 'stdio'] } }] } })),
);

function scratchEnv() {
  return {
    ...process.env,
    ANYGPT_LOG: 'warn',
    ANYGPT_DISCOVERY_CACHE_DIR: mkdtempSync(join(tmpdir(), 'anygpt-bench-cache-')),
    ANYGPT_DISCOVERY_STATE_DIR: mkdtempSync(join(tmpdir(), 'anygpt-bench-state-')),
  };
}

async function connect(command, args, env = scratchEnv()) {
  const client = new Client({ name: 'bench', version: '0' });
  await client.connect(new StdioClientTransport({ command, args, env, stderr: 'ignore' }));
  return client;
}

const variants = {
  direct: {
    client: await connect(process.execPath, [everything, 'stdio']),
    call: (c, i) => c.callTool({ name: 'echo', arguments: { message: `m${i}` } }),
  },
  ...(skipNpm ? {} : { 'gateway (npm bin)': {
    client: await connect(process.execPath, [join(root, 'bin/anygpt-discovery.js'), '--config', echoOnly]),
    call: (c, i) => c.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool: 'echo', arguments: { message: `m${i}` } } }),
  } }),
  'gateway (native)': {
    client: await connect(native, ['--config', echoOnly]),
    call: (c, i) => c.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool: 'echo', arguments: { message: `m${i}` } } }),
  },
  ...(compare ? { 'gateway (compare)': {
    client: await connect(compare, ['--config', echoOnly]),
    call: (c, i) => c.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool: 'echo', arguments: { message: `m${i}` } } }),
  } } : {}),
};

/** CPU time (ns) of every thread of `pid` so far; NaN where /proc is not there (not Linux). */
function cpuNs(pid) {
  try {
    return readdirSync(`/proc/${pid}/task`)
      .reduce((sum, task) => sum + Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]), 0);
  } catch {
    return Number.NaN;
  }
}

const samples = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
// CPU of the process each client talks to (the server itself for `direct`), timed rounds only.
const cpu = Object.fromEntries(Object.keys(variants).map((k) => [k, 0]));
for (const v of Object.values(variants)) for (let i = 0; i < 200; i++) await v.call(v.client, i); // warm-up
const perRound = Math.ceil(CALLS / ROUNDS);
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, v] of Object.entries(variants)) {
    const cpu0 = cpuNs(v.client.transport.pid);
    for (let i = 0; i < perRound; i++) {
      const t0 = performance.now();
      const result = await v.call(v.client, i);
      samples[name].push(performance.now() - t0);
      if (result.content[0].text !== `Echo: m${i}`) throw new Error(`${name}: wrong answer ${JSON.stringify(result)}`);
    }
    cpu[name] += cpuNs(v.client.transport.pid) - cpu0;
  }
}
for (const v of Object.values(variants)) await v.client.close();

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const fmt = (ms) => ms.toFixed(3);
const base = pct(samples.direct, 50);
console.log(`\nexecute_tool echo, ${perRound * ROUNDS} calls per variant in ${ROUNDS} interleaved rounds`);
console.log('| path | p50 ms | p99 ms | p50 overhead ms | p50 ratio | CPU µs per call |');
console.log('|---|---|---|---|---|---|');
for (const [name, xs] of Object.entries(samples)) {
  const p50 = pct(xs, 50);
  const cpuPerCall = (cpu[name] / xs.length / 1000).toFixed(0);
  console.log(`| ${name} | ${fmt(p50)} | ${fmt(pct(xs, 99))} | ${name === 'direct' ? '-' : `+${fmt(p50 - base)}`} | ${name === 'direct' ? '-' : `×${(p50 / base).toFixed(2)}`} | ${cpuPerCall} |`);
}

// Startup.
async function startOnce(command, args, env) {
  const t0 = performance.now();
  const client = await connect(command, args, env);
  const initialized = performance.now() - t0;
  let found;
  for (;;) {
    const r = await client.callTool({ name: 'search_tools', arguments: { query: 'echo' } });
    if (JSON.parse(r.content[0].text).results.length > 0) {
      found = performance.now() - t0;
      break;
    }
  }
  await client.close();
  return { initialized, found };
}

// `--starts 0` measures calls only: no startup table (a median of nothing has no value).
if (STARTS > 0) {
  console.log(`\nstartup on the demo config (3 servers), median of ${STARTS}`);
  console.log('| gateway | snapshot | spawn → initialize ms | spawn → first search hit ms |');
  console.log('|---|---|---|---|');
  for (const [name, command, args] of [
    ...(skipNpm ? [] : [['npm bin', process.execPath, [join(root, 'bin/anygpt-discovery.js'), '--config', demo]]]),
    ['native', native, ['--config', demo]],
  ]) {
    for (const withSnapshot of [false, true]) {
      const runs = [];
      const primed = scratchEnv();
      if (withSnapshot) await startOnce(command, args, primed); // writes the snapshot
      for (let i = 0; i < STARTS; i++) runs.push(await startOnce(command, args, withSnapshot ? primed : scratchEnv()));
      const median = (key) => fmt(pct(runs.map((r) => r[key]), 50));
      console.log(`| ${name} | ${withSnapshot ? 'yes' : 'no'} | ${median('initialized')} | ${median('found')} |`);
    }
  }
}
