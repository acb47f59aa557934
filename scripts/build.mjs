#!/usr/bin/env node
// Build the Node addon and the native binary for one target (the host unless --target),
// debug unless --release, with plain cargo:
//
//   node scripts/build.mjs [--release] [--target TRIPLE] [--zig]
//
// One `cargo build --lib --bin` builds the cdylib and the binary from one compile of the
// crate, with the same features, flags and target folder as `cargo test --target <host>`,
// so a rerun with nothing changed compiles nothing. The cdylib is copied beside
// package.json as discovery.<platform>.node (what binding.js loads in a clone), and
// binding.d.ts is rendered from napi-derive's type-def output (scripts/dts.mjs).
// --zig builds through cargo-zigbuild (linux gnu against glibc 2.17: see scripts/release.mjs).
// A Linux --release build uses it whenever cargo-zigbuild is on PATH, so `npm run build` and
// `npm run pack:release` make the same artifacts and never recompile the release tree for
// each other.
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, renameSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readTypeDefs, renderDts, TYPE_DEF_FILE } from './dts.mjs';
import { hostTriple } from './host.mjs';
import { cdylibName, exeName, platformOfTriple } from './platforms.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Build one target; returns the paths of the built addon and binary. */
export function build({ release = false, target = hostTriple(), zig = false, glibc = '2.17', quiet = false } = {}) {
  const platform = platformOfTriple(target);
  const typeDefs = join(root, TYPE_DEF_FILE);
  // napi-derive writes the type-defs only while compiling the crate: if they are missing
  // (a target/ from before), make cargo compile it once more by touching its root.
  if (!existsSync(typeDefs)) {
    const now = new Date();
    utimesSync(join(root, 'src/lib.rs'), now, now);
  }
  const cargoTarget = zig && target.endsWith('-linux-gnu') ? `${target}.${glibc}` : target;
  const args = [zig ? 'zigbuild' : 'build', '--lib', '--bin', 'anygpt-discovery', '--target', cargoTarget];
  if (release) args.push('--release');
  if (!quiet) process.stderr.write(`$ cargo ${args.join(' ')}\n`);
  execFileSync('cargo', args, { cwd: root, stdio: 'inherit' });

  const out = join(root, 'target', target, release ? 'release' : 'debug');
  const addon = join(root, `discovery.${platform.key}.node`);
  // Copy then rename: a running process keeps its mapped copy of the old file intact.
  copyFileSync(join(out, cdylibName(target)), `${addon}.tmp`);
  renameSync(`${addon}.tmp`, addon);
  writeDts();
  return { addon, binary: join(out, exeName(target)), platform };
}

/** binding.d.ts from the type-defs, written only when it changes. */
export function writeDts() {
  const header = readFileSync(join(root, 'src/node/header.d.ts'), 'utf8');
  const dts = renderDts(readTypeDefs(join(root, TYPE_DEF_FILE)), header);
  const file = join(root, 'binding.d.ts');
  if (!existsSync(file) || readFileSync(file, 'utf8') !== dts) writeFileSync(file, dts);
}

function option(name) {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

export function hasZigbuild() {
  return spawnSync('cargo-zigbuild', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Whether cargo-zigbuild finds a zig, where it looks: $CARGO_ZIGBUILD_ZIG_PATH, `zig` on
 * PATH, then the `ziglang` Python package. */
export function hasZig() {
  const runs = (command, args) => spawnSync(command, args, { stdio: 'ignore' }).status === 0;
  const configured = process.env.CARGO_ZIGBUILD_ZIG_PATH;
  if (configured) return runs(configured, ['version']);
  return runs('zig', ['version']) || runs('python3', ['-m', 'ziglang', 'version']);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const release = process.argv.includes('--release');
  const target = option('--target') || process.env.CARGO_BUILD_TARGET || hostTriple();
  const zig = process.argv.includes('--zig') || (release && target.includes('-linux-') && hasZigbuild());
  build({ release, target, zig });
}
