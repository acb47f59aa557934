#!/usr/bin/env node
// How much a huge result delays other calls: the price of the single-threaded runtime.
//
//   npm run build && node bench/stall.mjs [--native PATH] [--compare PATH] [--rounds 3]
//
// Through the native gateway, one server (our fault fixture) returns 10 MB while the client
// keeps calling `echo` on a second server; reports how long the big call took and the worst
// echo latency meanwhile. --compare runs the same against another build, for an A/B.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { hostTriple } from '../scripts/host.mjs';

const root = join(import.meta.dirname, '..');
const option = (name) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const ROUNDS = Number(option('--rounds') ?? 3);
const fixture = join(root, '__test__/fixtures/fault-server.mjs');
const builds = { native: option('--native') ?? join(root, 'target', hostTriple(), 'release/anygpt-discovery') };
if (option('--compare')) builds.compare = option('--compare');

async function measure(binary) {
  const dir = mkdtempSync(join(tmpdir(), 'anygpt-stall-'));
  const server = (name) => ({ name, connection: { command: process.execPath, args: [fixture] } });
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ discovery: { audit: { enabled: false }, servers: [server('huge'), server('steady')] } }));
  const client = new Client({ name: 'bench', version: '0' });
  const env = { ...process.env, ANYGPT_LOG: 'warn', ANYGPT_DISCOVERY_CACHE_DIR: dir, ANYGPT_DISCOVERY_STATE_DIR: dir };
  await client.connect(new StdioClientTransport({ command: binary, args: ['--config', join(dir, 'config.json')], env, stderr: 'ignore' }));
  const execute = (server, tool, args) => client.callTool({ name: 'execute_tool', arguments: { server, tool, arguments: args } });
  for (let i = 0; i < 50; i++) await execute('steady', 'echo', { message: 'warm' });
  await execute('huge', 'big', { bytes: 1000 });
  const rounds = [];
  for (let round = 0; round < ROUNDS; round++) {
    let done = false;
    let worst = 0;
    const t0 = performance.now();
    const big = execute('huge', 'big', { bytes: 10_000_000 }).then(() => { done = true; });
    while (!done) {
      const t = performance.now();
      await execute('steady', 'echo', { message: 'meanwhile' });
      worst = Math.max(worst, performance.now() - t);
    }
    await big;
    rounds.push({ big: performance.now() - t0, worst });
  }
  await client.close();
  return rounds;
}

console.log('| build | round | 10 MB call ms | worst concurrent echo ms |');
console.log('|---|---|---|---|');
for (const [name, binary] of Object.entries(builds)) {
  (await measure(binary)).forEach((r, i) => console.log(`| ${name} | ${i + 1} | ${r.big.toFixed(0)} | ${r.worst.toFixed(1)} |`));
}
