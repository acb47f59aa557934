#!/usr/bin/env node
// Build the Node addon (debug unless --release) for the host triple, plus the native binary.
//
//   node scripts/build.mjs [--release]
//
// The addon lands beside package.json as discovery.<platform>.node, loaded by binding.js
// (napi's generated loader); index.js wraps it. The TS declarations the Rust types cannot
// express (the config shape, CallToolResult) come from src/node/header.d.ts.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostTriple } from './host.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const release = process.argv.includes('--release');
const target = process.env.CARGO_BUILD_TARGET || hostTriple();
const header = readFileSync(join(root, 'src/node/header.d.ts'), 'utf8');
const napi = join(root, 'node_modules/@napi-rs/cli/dist/cli.js');

const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit' });

run(process.execPath, [
  napi, 'build', '--platform', '--target', target,
  '--js', 'binding.js', '--dts', 'binding.d.ts', '--dts-header', header,
  ...(release ? ['--release'] : []),
]);
run('cargo', ['build', '--bin', 'anygpt-discovery', '--target', target, ...(release ? ['--release'] : [])]);
