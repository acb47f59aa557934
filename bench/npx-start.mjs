#!/usr/bin/env node
// Warm start of the published package: `npx -y @anygpt/discovery` from a local registry,
// with npx's cache already holding it, until the gateway answers `initialize` — next to
// `node -e 0` (Node's own start) and `node bin/anygpt-discovery.js` from this clone, in one
// interleaved run on the same config.
//
//   npm run pack:release -- --out /tmp/packs
//   node bench/npx-start.mjs --packs /tmp/packs [--rounds 15]
//
// The clone's bin loads whatever discovery.<platform>.node the last build left (debug after
// `npm test`, release after pack:release): the script prints its size so the figure says which.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { cleanEnv, demoConfig, npxSession, publishAll, registryLogin, startRegistry } from '../scripts/test-install.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i === -1 ? fallback : process.argv[i + 1];
};
const packs = arg('--packs');
if (!packs) {
  process.stderr.write('usage: node bench/npx-start.mjs --packs <dir from npm run pack:release> [--rounds N]\n');
  process.exit(2);
}
const rounds = Number(arg('--rounds', '15'));

async function initializeMs(command, args, env, cwd) {
  const transport = new StdioClientTransport({ command, args, env, cwd, stderr: 'ignore' });
  const client = new Client({ name: 'bench', version: '0.0.0' });
  const t = performance.now();
  await client.connect(transport);
  const ms = performance.now() - t;
  await client.close();
  return ms;
}

function nodeE0() {
  const t = performance.now();
  spawnSync(process.execPath, ['-e', '0']);
  return performance.now() - t;
}

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return `median ${q(0.5).toFixed(0)} ms, p90 ${q(0.9).toFixed(0)} ms, min ${s[0].toFixed(0)} ms`;
};

const work = mkdtempSync(join(tmpdir(), 'anygpt-discovery-npx-bench-'));
const registry = await startRegistry(work);
try {
  publishAll(resolve(packs), await registryLogin(registry.url, work), registry.url);
  const config = demoConfig(work);
  const runDir = join(work, 'run');
  mkdirSync(runDir);
  const env = cleanEnv(work, registry.url, 'run');
  const isolated = (name) => ({ ...env, ANYGPT_DISCOVERY_CACHE_DIR: join(work, name, 'cache'), ANYGPT_DISCOVERY_STATE_DIR: join(work, name, 'state') });

  // Warm-up: npx installs the package into its cache once.
  const first = await npxSession({ url: registry.url, cwd: runDir, env, config, clientName: 'bench' });
  process.stdout.write(`cold npx (install from the local registry included): ${first.initializeMs.toFixed(0)} ms\n`);
  await first.client.close();

  const times = { 'node -e 0': [], 'node bin/anygpt-discovery.js': [], 'npx -y @anygpt/discovery (warm)': [] };
  for (let i = 0; i < rounds; i++) {
    times['node -e 0'].push(nodeE0());
    times['node bin/anygpt-discovery.js'].push(await initializeMs(process.execPath, [join(root, 'bin/anygpt-discovery.js'), '--config', config], isolated(`bin${i}`), runDir));
    times['npx -y @anygpt/discovery (warm)'].push(await initializeMs('npx', ['--registry', `${registry.url}/`, '-y', '@anygpt/discovery', '--config', config], isolated(`npx${i}`), runDir));
  }
  const addon = join(root, `discovery.${process.platform}-${process.arch}-gnu.node`);
  process.stdout.write(`node ${process.version}, ${rounds} rounds, start until initialize is answered (node -e 0: until exit)\n`);
  for (const [name, xs] of Object.entries(times)) process.stdout.write(`  ${name.padEnd(34)} ${stats(xs)}\n`);
  try {
    process.stdout.write(`clone's addon: ${statSync(addon).size} bytes\n`);
  } catch {}
} finally {
  registry.child.kill();
  rmSync(work, { recursive: true, force: true });
}
