#!/usr/bin/env node
// `npm run eval:search -- --catalog <catalog.jsonl> --queries <queries.jsonl> --out <results.jsonl> [--limit 10]`
//
// Runs the `anygpt-eval` developer binary (bench/eval.rs; not part of the shipped CLI): it
// indexes the catalog offline, sends every query through Engine::search (the code path of
// `search_tools`, server filter off), writes one `{"id","results":["server:tool",…]}` line per
// query and prints Recall@1/5/10 and the p50/p99 latency. Built (or brought up to date) with
// the profile of the newest anygpt-discovery binary for the host triple — release after
// `npm run build`, for latency figures — debug when there is none.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hasZigbuild } from './build.mjs';
import { hostTriple } from './host.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const target = process.env.CARGO_BUILD_TARGET || hostTriple();
const suffix = process.platform === 'win32' ? '.exe' : '';
const newest = ['release', 'debug']
  .filter((profile) => existsSync(join(root, 'target', target, profile, `anygpt-discovery${suffix}`)))
  .sort(
    (a, b) =>
      statSync(join(root, 'target', target, b, `anygpt-discovery${suffix}`)).mtimeMs -
      statSync(join(root, 'target', target, a, `anygpt-discovery${suffix}`)).mtimeMs,
  )[0];
const profile = newest ?? 'debug';
// Built the way scripts/build.mjs builds that profile (a Linux release through
// cargo-zigbuild when present), so cargo reuses the compiled crate instead of redoing it.
const zig = profile === 'release' && target.includes('-linux-gnu') && hasZigbuild();
const args = [zig ? 'zigbuild' : 'build', '--quiet', '--bin', 'anygpt-eval', '--target', zig ? `${target}.2.17` : target];
if (profile === 'release') args.push('--release');
execFileSync('cargo', args, { cwd: root, stdio: 'inherit' });
const binary = join(root, 'target', target, profile, `anygpt-eval${suffix}`);
process.stderr.write(`eval:search using ${binary}\n`);
const { status } = spawnSync(binary, process.argv.slice(2), { stdio: 'inherit' });
process.exit(status ?? 1);
