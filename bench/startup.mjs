#!/usr/bin/env node
// Startup with many servers served from snapshots: native binary spawn → `initialize`
// answered, and → the first `search_tools` answer (which waits for the index), for a few
// servers and for every server of a catalog (328 servers, 5.6k tools in combined.jsonl).
//
//   npm run build            # or: cargo build --release --bin anygpt-discovery --target <triple>
//   node bench/startup.mjs [--runs 15] [--catalog ../shared/data/catalogs/combined.jsonl]
//                          [--binary PATH] [--compare PATH] [--cold] [--secrets]
//
// The snapshots are written here in the gateway's own format (`src/catalog/snapshot.rs`: file
// name and fingerprint from the launch spec and the gateway version), so no server ever starts:
// each is `sleep 600`, never spawned while its snapshot is fresh. The client speaks raw JSON
// lines (no SDK) so that only the gateway is timed. Runs alternate between the setups (and
// the builds, with --compare) so machine noise hits all alike; medians are reported.
//
// A snapshot the gateway writes itself also holds what its trust checks found in each tool,
// so a start reuses that instead of checking thousands of tools again. The snapshots written
// here have none: the warm-up start of each setup is left running for a moment so the gateway
// stores its findings, as it would have when it listed the servers. `--cold` rewrites the
// snapshots without findings before every start instead (the checks run on every start).
//
// `--secrets` gives every server an API key in its `env`, as most real configs do: each is
// registered for scrubbing before `initialize` is answered.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostTriple } from '../scripts/host.mjs';
import { serveSnapshots, writeSnapshot } from './snapshots.mjs';

const root = join(import.meta.dirname, '..');
const option = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const RUNS = Number(option('--runs', 15));
const catalogPath = option('--catalog', join(root, '../shared/data/catalogs/combined.jsonl'));
const binary = option('--binary', join(root, 'target', hostTriple(), 'release/anygpt-discovery'));
const compare = option('--compare');
const cold = process.argv.includes('--cold');
const secrets = process.argv.includes('--secrets');
/** How long the warm-up start runs on after its search, to store the checks' findings. */
const SETTLE_MS = 1500;
if (!existsSync(binary)) throw new Error(`${binary} is missing: run \`npm run build\` first`);
function byServer() {
  const servers = new Map();
  for (const line of readFileSync(catalogPath, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const { server, name, description, inputSchema } = JSON.parse(line);
    if (!servers.has(server)) servers.set(server, []);
    servers.get(server).push({ name, description, inputSchema });
  }
  return [...servers.values()];
}

/** A config of `toolLists.length` servers and a cache folder holding a fresh snapshot of each. */
function setup(toolLists) {
  const dir = mkdtempSync(join(tmpdir(), 'anygpt-startup-'));
  const cache = join(dir, 'cache');
  mkdirSync(join(cache, 'catalog'), { recursive: true });
  // A key of a key's shape, different for every server.
  const env = (i) => (secrets ? { env: { API_KEY: `sk-${createHash('sha256').update(`key ${i}`).digest('hex').slice(0, 40)}` } } : {});
  // Field order and defaults as the gateway serializes a ConnectionSpec.
  const connection = (i) => ({ type: 'stdio', command: 'sleep', args: ['600'], ...env(i) });
  const writeSnapshots = () => toolLists.forEach((tools, i) => writeSnapshot(cache, `s${i}`, connection(i), tools));
  writeSnapshots();
  const servers = toolLists.map((_, i) => ({ name: `s${i}`, connection: { command: 'sleep', args: ['600'], ...env(i) } }));
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ discovery: { audit: { enabled: false }, servers } }));
  const last = toolLists.at(-1).at(-1).name;
  return { config, cache, query: last, servers: toolLists.length, tools: toolLists.flat().length, writeSnapshots };
}

/**
 * One start: ms from spawn to the `initialize` answer and to the first search answer. The
 * gateway is ended at once after its search, or `settleMs` later.
 */
function start(bin, { config, cache, query }, settleMs = 0) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const times = {};
    const child = serveSnapshots(bin, config, cache, (message) => {
      if (message.id === 1) {
        times.initialize = performance.now() - t0;
        send({ method: 'notifications/initialized' });
        send({ id: 2, method: 'tools/call', params: { name: 'search_tools', arguments: { query } } });
      } else if (message.id === 2) {
        times.search = performance.now() - t0;
        const body = JSON.parse(message.result.content[0].text);
        if (body.results?.[0]?.tool !== query) reject(new Error(`search missed ${query}: ${message.result.content[0].text.slice(0, 200)}`));
        // The next start waits for this process to be gone: a 328-server gateway still
        // tearing down beside the next start made the 3-server figures the noisier ones.
        child.once('exit', () => resolve(times));
        setTimeout(() => child.kill('SIGTERM'), settleMs);
      }
    });
    const send = (message) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
    child.on('error', reject);
    send({
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '0' } },
    });
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const lists = byServer();
const setups = [setup(lists.slice(0, 3)), setup(lists)];
const builds = [['this build', binary], ...(compare ? [['compare', compare]] : [])];
const results = new Map();
for (let run = 0; run < RUNS + 1; run++) {
  for (const [label, bin] of builds) {
    for (const s of setups) {
      if (cold) s.writeSnapshots();
      const times = await start(bin, s, run === 0 && !cold ? SETTLE_MS : 0);
      if (run === 0) continue; // warm-up: page cache, first exec, the checks' findings stored
      const key = `${label}|${s.servers}`;
      if (!results.has(key)) results.set(key, { initialize: [], search: [] });
      results.get(key).initialize.push(times.initialize);
      results.get(key).search.push(times.search);
    }
  }
}
// Minimums too: on a machine shared with builds the medians move by several ms from run to
// run, while the fastest start of each setup shows what the gateway itself costs.
console.log(`| build | servers (tools) | spawn → initialize ms | spawn → first search ms | initialize → search ms | min initialize / search ms |`);
console.log(`|---|---|---|---|---|---|`);
for (const [label] of builds) {
  for (const s of setups) {
    const r = results.get(`${label}|${s.servers}`);
    const init = median(r.initialize);
    const search = median(r.search);
    const min = (xs) => Math.min(...xs).toFixed(1);
    console.log(`| ${label} | ${s.servers} (${s.tools}) | ${init.toFixed(1)} | ${search.toFixed(1)} | ${(search - init).toFixed(1)} | ${min(r.initialize)} / ${min(r.search)} |`);
  }
}
console.log(`\nmedian of ${RUNS} starts each${cold ? ', snapshots without stored findings (--cold)' : ''}${secrets ? ', a key per server (--secrets)' : ''}; ${binary}${compare ? ` vs ${compare}` : ''}`);
