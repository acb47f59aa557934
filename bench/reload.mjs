#!/usr/bin/env node
// Reload time with 100 servers, excluding their start-up (#12 part 6; goal < 50 ms): how long
// `engine.reload(config)` takes through the Node API when the new config
//   - touches no server (every server kept: its handle, session and tools carried over with
//     the rules applied again), and
//   - changes one server's launch (that one restarted: a new handle, served from its snapshot),
// and how long until a search after it answers (which waits for the changed server's snapshot).
//
//   npm run build                      # the addon this measures (or build:debug for a debug figure)
//   node bench/reload.mjs [--servers 100] [--runs 30]
//
// Tool lists come from tests/fixtures/registry-catalog.jsonl (public, ~1.2k tools), cycled to
// fill the servers. Every server has a fresh snapshot written here in the gateway's format
// (`src/catalog/snapshot.rs`), so none is ever spawned: each is `sleep 600`, and the changed
// server alternates between two launches that both have a snapshot.
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeSnapshot } from './snapshots.mjs';

const root = join(import.meta.dirname, '..');
const option = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const SERVERS = Number(option('--servers', 100));
const RUNS = Number(option('--runs', 30));
function toolLists() {
  const servers = new Map();
  for (const line of readFileSync(join(root, 'tests/fixtures/registry-catalog.jsonl'), 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const { server, name, description, inputSchema } = JSON.parse(line);
    if (!servers.has(server)) servers.set(server, []);
    servers.get(server).push({ name, description, inputSchema });
  }
  return [...servers.values()];
}

const cache = mkdtempSync(join(tmpdir(), 'anygpt-reload-bench-'));
mkdirSync(join(cache, 'catalog'), { recursive: true });
process.env.ANYGPT_DISCOVERY_CACHE_DIR = cache;
process.env.ANYGPT_DISCOVERY_STATE_DIR = cache;
process.env.ANYGPT_LOG ??= 'warn';

const lists = toolLists();
const launch = (seconds) => ({ command: 'sleep', args: [String(seconds)] });
const servers = Array.from({ length: SERVERS }, (_, i) => {
  const name = `s${i}`;
  const tools = lists[i % lists.length];
  // Field order and defaults as the gateway serializes a ConnectionSpec.
  writeSnapshot(cache, name, { type: 'stdio', ...launch(600) }, tools);
  if (i === 0) writeSnapshot(cache, name, { type: 'stdio', ...launch(601) }, tools);
  return { name, connection: launch(600) };
});
const tools = servers.reduce((n, _, i) => n + lists[i % lists.length].length, 0);
const configWith = (firstLaunch) => ({
  audit: { enabled: false },
  servers: [{ ...servers[0], connection: launch(firstLaunch) }, ...servers.slice(1)],
  toolRules: [{ pattern: '*delete*', enabled: false }],
});

const { DiscoveryEngine } = await import('../index.js');
const engine = new DiscoveryEngine(configWith(600));
const probe = lists[0].at(-1).name;
await engine.searchTools(probe);

async function timed(config) {
  const t0 = performance.now();
  const summary = await engine.reload(config);
  const reload = performance.now() - t0;
  const { results } = await engine.searchTools(probe, { server: 's0' });
  const search = performance.now() - t0;
  if (results[0]?.tool !== probe) throw new Error(`search after reload missed ${probe}`);
  return { reload, search, summary };
}

const none = [];
const one = [];
let first = 600;
for (let run = 0; run < RUNS; run++) {
  const kept = await timed(configWith(first));
  if (kept.summary.kept.length !== SERVERS) throw new Error(`expected every server kept: ${JSON.stringify(kept.summary)}`);
  none.push(kept);
  first = first === 600 ? 601 : 600;
  const changed = await timed(configWith(first));
  if (changed.summary.restarted.join() !== 's0') throw new Error(`expected s0 restarted: ${JSON.stringify(changed.summary)}`);
  one.push(changed);
}
await engine.close();

const stat = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return `median ${at(0.5).toFixed(2)} ms, p90 ${at(0.9).toFixed(2)} ms`;
};
console.log(`${SERVERS} servers, ${tools} tools, ${RUNS} runs each (Node ${process.version})`);
for (const [label, runs] of [['no server changed', none], ['one server changed', one]]) {
  console.log(`${label.padEnd(20)} reload: ${stat(runs.map((r) => r.reload))}; reload + search: ${stat(runs.map((r) => r.search))}`);
}
