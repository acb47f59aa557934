// `npm run pack:release` checks its toolchain before it builds: without cargo-zigbuild and zig
// a linux-gnu build would take minutes with plain cargo and then fail the glibc floor check.
// The script runs for real with a PATH that has node, cargo and rustc but no cargo-zigbuild,
// zig nor python3 (whose `ziglang` package is the other place zig is found).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { toolchainProblem } from '../scripts/release.mjs';
import { PLATFORMS } from '../scripts/platforms.mjs';
import { root, tempDir } from './helpers.mjs';

/** The absolute path of `command` on this PATH. */
function which(command) {
  const found = spawnSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' }).stdout.trim();
  assert.ok(found, `${command} is on PATH`);
  return found;
}

/** A folder holding only links to `commands`, to be the whole PATH of a child. */
function onlyThese(commands) {
  const dir = join(tempDir('anygpt-discovery-path-'), 'bin');
  mkdirSync(dir);
  for (const command of commands) symlinkSync(which(command), join(dir, command));
  return dir;
}

test('without cargo-zigbuild, pack:release stops before building and names the fix', () => {
  // rustup's proxies find their toolchain through RUSTUP_HOME/CARGO_HOME, not PATH.
  const path = [onlyThese(['cargo', 'rustc']), dirname(process.execPath)].join(':');
  const out = join(tempDir(), 'packs');
  const started = Date.now();
  const run = spawnSync(process.execPath, ['scripts/release.mjs', '--out', out], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, PATH: path, CARGO_ZIGBUILD_ZIG_PATH: '' },
    timeout: 120_000,
  });
  const took = Date.now() - started;
  assert.equal(run.status, 1, run.stderr);
  assert.match(run.stderr, /pack:release: cargo-zigbuild and zig not found: linux-x64-gnu/);
  assert.match(run.stderr, /glibc 2\.17/);
  assert.match(run.stderr, /pip install cargo-zigbuild/);
  assert.match(run.stderr, /Nothing was built\./);
  assert.doesNotMatch(run.stderr, /\$ cargo/, 'no cargo build started');
  assert.ok(took < 20_000, `failed at once, not after a build (${took} ms)`);
  assert.ok(!existsSync(out) || readdirSync(out).length === 0, 'nothing written');
});

test('the toolchain check names what is missing, and only for glibc builds', () => {
  const [gnu, musl] = ['linux-x64-gnu', 'linux-x64-musl'].map((key) => PLATFORMS.find((p) => p.key === key));
  const mac = PLATFORMS.find((p) => p.os === 'darwin');
  assert.equal(toolchainProblem([gnu], { zigbuild: true, zig: true }), undefined);
  assert.match(toolchainProblem([gnu], { zigbuild: true, zig: false }), /^zig not found: linux-x64-gnu must link/);
  assert.match(toolchainProblem([gnu, musl], { zigbuild: false, zig: true }), /^cargo-zigbuild not found: linux-x64-gnu must/);
  assert.equal(toolchainProblem([musl, mac], { zigbuild: false, zig: false }), undefined);
  assert.equal(toolchainProblem([], { zigbuild: false, zig: false }), undefined);
});
