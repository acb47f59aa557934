// The loader (binding.js) when no binary fits: on every platform we publish for, the error
// names the package it looked for, the detected platform/arch/libc and the two real fixes.
// Each case runs the shipped files — binding.js, index.js, the bin — from a folder with no
// addon beside them, in a child node whose platform/arch (and /usr/bin/ldd, for musl) a
// preload script overrides.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { PLATFORMS } from '../scripts/platforms.mjs';
import { root, tempDir } from './helpers.mjs';

const version = JSON.parse((await import('node:fs')).readFileSync(join(root, 'package.json'), 'utf8')).version;

/** A copy of the published JS files (no addon), as npm would install them without the binary. */
function installedCopy() {
  const dir = tempDir('anygpt-discovery-loader-');
  for (const file of ['package.json', 'binding.js', 'index.js']) cpSync(join(root, file), join(dir, file));
  cpSync(join(root, 'bin'), join(dir, 'bin'), { recursive: true });
  cpSync(join(root, 'lib'), join(dir, 'lib'), { recursive: true });
  return dir;
}

/** A preload that makes node report another platform (and a musl ldd if asked). */
function preload(dir, { os, cpu, libc }) {
  const file = join(dir, 'fake-platform.cjs');
  writeFileSync(
    file,
    `Object.defineProperty(process, 'platform', { value: ${JSON.stringify(os)} })
Object.defineProperty(process, 'arch', { value: ${JSON.stringify(cpu)} })
const fs = require('node:fs')
const read = fs.readFileSync
fs.readFileSync = function (path, ...rest) {
  if (path === '/usr/bin/ldd') return ${JSON.stringify(libc === 'musl' ? '#!/bin/sh\n# musl libc (x86_64)\n' : '#!/bin/bash\n# GNU C Library\n')}
  return read.call(this, path, ...rest)
}
`,
  );
  return file;
}

function run(dir, platform, args) {
  return spawnSync(process.execPath, ['-r', preload(dir, platform), ...args], { cwd: dir, encoding: 'utf8' });
}

function requireError(dir, platform) {
  const result = run(dir, platform, [
    '-e',
    `try { require('./index.js'); console.log('LOADED') } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }`,
  ]);
  assert.equal(result.status, 0, result.stderr);
  assert.notEqual(result.stdout.trim(), 'LOADED');
  return JSON.parse(result.stdout);
}

function assertNoNapiBoilerplate(message) {
  assert.doesNotMatch(message, /npm has a bug|package-lock|node_modules and try again/i);
}

describe('loader without a binary', () => {
  for (const platform of PLATFORMS) {
    test(`${platform.key}: names the package, the platform and both fixes`, () => {
      const dir = installedCopy();
      const error = requireError(dir, platform);
      assert.equal(error.code, 'ANYGPT_DISCOVERY_NO_BINARY');
      const { message } = error;
      assert.match(message, new RegExp(`no native binary loaded for ${platform.key} `));
      assert.ok(message.includes(`platform ${platform.os}, arch ${platform.cpu}`), message);
      if (platform.libc) assert.ok(message.includes(`libc ${platform.libc}`), message);
      else assert.ok(!message.includes('libc'), message);
      assert.ok(message.includes(`@anygpt/discovery-${platform.key}: not installed`), message);
      assert.ok(message.includes(join(dir, `discovery.${platform.key}.node`)), message);
      assert.ok(message.includes('install with optional dependencies on'), message);
      assert.ok(message.includes(`npm install @anygpt/discovery-${platform.key}@${version}`), message);
      assert.ok(message.includes('`npm run build`'), message);
      assertNoNapiBoilerplate(message);
    });
  }

  test('an unsupported platform says there is no prebuilt binary and how to build one', () => {
    const dir = installedCopy();
    const { message } = requireError(dir, { os: 'freebsd', cpu: 'x64' });
    assert.match(message, /no native binary loaded for freebsd-x64 \(platform freebsd, arch x64\)/);
    assert.match(message, /There is no prebuilt binary for freebsd-x64; prebuilt: linux-x64-gnu, /);
    assert.match(message, /npm ci && npm run build/);
    assertNoNapiBoilerplate(message);
  });

  test('a platform package of another version is refused by name and version', () => {
    const dir = installedCopy();
    const pkg = join(dir, 'node_modules/@anygpt/discovery-linux-x64-gnu');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: '@anygpt/discovery-linux-x64-gnu', version: '0.0.1', main: 'discovery.linux-x64-gnu.node' }));
    const { message } = requireError(dir, PLATFORMS[0]);
    assert.ok(message.includes(`@anygpt/discovery-linux-x64-gnu: version 0.0.1 is installed, @anygpt/discovery ${version} needs the same version`), message);
  });

  test('a platform package whose binary does not load says why', () => {
    const dir = installedCopy();
    const pkg = join(dir, 'node_modules/@anygpt/discovery-linux-x64-gnu');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: '@anygpt/discovery-linux-x64-gnu', version, main: 'discovery.linux-x64-gnu.node' }));
    writeFileSync(join(pkg, 'discovery.linux-x64-gnu.node'), 'not a shared object');
    const { message } = requireError(dir, PLATFORMS[0]);
    assert.match(message, /@anygpt\/discovery-linux-x64-gnu: installed but does not load: /);
  });

  test('the bin prints the message without a stack and exits 1, --help included', () => {
    const dir = installedCopy();
    const platform = PLATFORMS.find((p) => p.key === 'linux-x64-musl');
    const result = run(dir, platform, [join(dir, 'bin/anygpt-discovery.js'), '--help']);
    assert.equal(result.status, 1);
    assert.equal(result.stdout, '');
    assert.ok(result.stderr.startsWith('error: @anygpt/discovery: no native binary loaded for linux-x64-musl '), result.stderr);
    assert.ok(result.stderr.includes('`npm run build`'), result.stderr);
    assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
  });
});
