#!/usr/bin/env node
// `npm run eval:search -- --catalog <catalog.jsonl> --queries <queries.jsonl> --out <results.jsonl> [--limit 10]`
//
// Runs the native binary's hidden `eval` command: it indexes the catalog offline, sends every
// query through Engine::search (the code path of `search_tools`, server filter off), writes
// one `{"id","results":["server:tool",…]}` line per query and prints Recall@1/5/10 and the
// p50/p99 latency. Uses the newest of the release and debug binaries for the host triple
// (release for latency figures: `npm run build`),
// building the debug one if neither exists.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostTriple } from './host.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const target = process.env.CARGO_BUILD_TARGET || hostTriple();
const exe = process.platform === 'win32' ? 'anygpt-discovery.exe' : 'anygpt-discovery';
const candidates = ['release', 'debug']
  .map((profile) => join(root, 'target', target, profile, exe))
  .filter((path) => existsSync(path))
  .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);

let binary = candidates[0];
if (!binary) {
  execFileSync('cargo', ['build', '--bin', 'anygpt-discovery', '--target', target], { cwd: root, stdio: 'inherit' });
  binary = join(root, 'target', target, 'debug', exe);
}
process.stderr.write(`eval:search using ${binary}\n`);
const { status } = spawnSync(binary, ['eval', ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(status ?? 1);
