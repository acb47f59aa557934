#!/usr/bin/env node
// `npm test`: everything CI runs, in order. Builds the debug addon and binary for the host
// triple, then the Rust tests for the same triple (so nothing compiles twice), the node
// tests (with `uvx` on PATH, installed from PyPI into .ci/uv if missing: see uv.mjs), and the
// type check of index.d.ts. The replica tests run a real redis-server and haproxy, the sign-in
// test a real chromium-headless-shell: installed from Debian when missing and this runs as root
// (CI), else the run stops naming them.
import { execFileSync } from 'node:child_process';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostTriple } from './host.mjs';
import { ensureDebianTools } from './debian.mjs';
import { ensureUvx } from './uv.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const target = process.env.CARGO_BUILD_TARGET || hostTriple();
const run = (cmd, args) => {
  process.stderr.write(`\n$ ${cmd} ${args.join(' ')}\n`);
  execFileSync(cmd, args, { cwd: root, stdio: 'inherit' });
};

// First, so a machine that cannot get uvx or a Debian tool learns it before the build.
const uvBin = ensureUvx(root);
ensureDebianTools();
if (uvBin) process.env.PATH = `${uvBin}${delimiter}${process.env.PATH}`;
run(process.execPath, ['scripts/build.mjs']);
run('cargo', ['test', '--target', target]);
// Node ≥ 21 takes glob patterns here (a bare folder is read as a module path).
run(process.execPath, ['--test', '--test-reporter=spec', '__test__/*.test.mjs']);
run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', '__test__/types']);
