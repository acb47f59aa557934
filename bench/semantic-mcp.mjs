#!/usr/bin/env node
// search_tools through MCP at 10k tools with the semantic tier on: the native binary serves
// the catalog of `cargo bench --bench semantic` (combined.jsonl repeated under renamed servers
// up to 10,000 tools) from snapshots (no server ever starts), and a raw JSON-lines client
// times every development query, one at a time, after every tool has its vector.
//
//   cargo build --profile profiling --bin anygpt-discovery --target <triple>
//   node bench/semantic-mcp.mjs [--binary PATH] [--model DIR] [--vectors DIR] [--passes 2]
//                               [--data ../shared/data]
//
// --vectors names the folder of a vector cache file to start from (`vectors-<model>.bin`, e.g.
// the `catalog` folder of the cache the Rust bench kept with SEMANTIC_BENCH_CACHE): the same
// tool texts, so nothing is embedded again. Without it the gateway embeds all 10k tools first
// (about ten minutes here), which this script waits for (`vectorsPending` gone).
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostTriple } from '../scripts/host.mjs';
import { serveSnapshots, writeSnapshot } from './snapshots.mjs';

const root = join(import.meta.dirname, '..');
const option = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const TOOLS = 10_000;
const PASSES = Number(option('--passes', 2));
const data = option('--data', join(root, '../shared/data'));
const binary = option('--binary', join(root, 'target', hostTriple(), 'profiling/anygpt-discovery'));
const model = option('--model', join(root, 'packages/discovery-model-minilm'));
const vectors = option('--vectors');
if (!existsSync(binary)) throw new Error(`${binary} is missing: build it first`);

/** The Rust bench's catalog: the first TOOLS lines of combined.jsonl, repeated as `<server>-copyN`. */
function catalog() {
  const lines = readFileSync(join(data, 'catalogs/combined.jsonl'), 'utf8').split('\n').filter((l) => l.trim());
  const servers = new Map();
  for (let i = 0; i < TOOLS; i++) {
    const copy = Math.floor(i / lines.length);
    const { server, name, description, inputSchema } = JSON.parse(lines[i % lines.length]);
    const renamed = copy === 0 ? server : `${server}-copy${copy}`;
    if (!servers.has(renamed)) servers.set(renamed, []);
    servers.get(renamed).push({ name, description, inputSchema });
  }
  return servers;
}

function devQueries() {
  const dir = join(data, 'queries/dev');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .flatMap((f) =>
      readFileSync(join(dir, f), 'utf8')
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l).query),
    );
}

const dir = mkdtempSync(join(tmpdir(), 'anygpt-semantic-mcp-'));
const cache = join(dir, 'cache');
mkdirSync(join(cache, 'catalog'), { recursive: true });
// Field order and defaults as the gateway serializes a ConnectionSpec.
const connection = { type: 'stdio', command: 'sleep', args: ['600'] };
const servers = catalog();
for (const [name, tools] of servers) writeSnapshot(cache, name, connection, tools);
if (vectors) {
  for (const file of readdirSync(vectors).filter((f) => f.startsWith('vectors-'))) {
    copyFileSync(join(vectors, file), join(cache, 'catalog', file));
  }
}
const config = join(dir, 'config.json');
writeFileSync(
  config,
  JSON.stringify({
    discovery: {
      audit: { enabled: false },
      search: { model },
      servers: [...servers.keys()].map((name) => ({ name, connection: { command: 'sleep', args: ['600'] } })),
    },
  }),
);

const waiting = new Map();
let nextId = 1;
const child = serveSnapshots(binary, config, cache, (message) => {
  waiting.get(message.id)?.(message);
  waiting.delete(message.id);
});
function request(method, params) {
  const id = nextId++;
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
  });
}
const callTool = async (name, args) => {
  const answer = await request('tools/call', { name, arguments: args });
  return JSON.parse(answer.result.content[0].text);
};

await request('initialize', {
  protocolVersion: '2025-06-18',
  capabilities: {},
  clientInfo: { name: 'bench', version: '0' },
});
child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
const listed = await callTool('list_mcp_servers', {});
const tools = listed.servers.reduce((sum, s) => sum + (s.toolCount ?? 0), 0);
const started = performance.now();
for (;;) {
  const body = await callTool('search_tools', { query: 'read a file' });
  const status = (await callTool('list_mcp_servers', {})).semanticSearch;
  if (status === 'failed') throw new Error('the model did not load');
  if (status === 'on' && body.vectorsPending === undefined) break;
  await new Promise((resolve) => setTimeout(resolve, 1000));
}
const ready = (performance.now() - started) / 1000;
const queries = devQueries();
const times = [];
for (let pass = 0; pass <= PASSES; pass++) {
  for (const query of queries) {
    const t0 = performance.now();
    await callTool('search_tools', { query, limit: 10 });
    if (pass > 0) times.push(performance.now() - t0);
  }
}
child.kill('SIGTERM');
rmSync(dir, { recursive: true, force: true });
times.sort((a, b) => a - b);
const at = (pct) => times[Math.min(times.length, Math.max(1, Math.ceil((times.length * pct) / 100))) - 1];
console.log('| tools | search_tools p50 / p99 (MCP, stdio) | vectors ready after |');
console.log('|---|---|---|');
console.log(`| ${tools} | ${at(50).toFixed(2)} / ${at(99).toFixed(2)} ms | ${ready.toFixed(0)} s |`);
console.log(`\n${queries.length} queries (every dev set), one warm-up pass then ${PASSES} timed; ${binary}`);
