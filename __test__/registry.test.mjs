// `add <ref>`, `remove <name>` and `registry search` against a registry of our own on
// 127.0.0.1 speaking the MCP Registry API (`GET /v0/servers?search=&version=latest`).
//
// Its server.json documents are the official registry repository's examples
// (modelcontextprotocol/registry, docs/reference/server-json/generic-server-json.md, MIT
// License, Copyright (c) 2025 GitHub): "Basic Server with NPM Package" (brave-search), "Python
// Package Example" (weather-mcp, made the time server below) and the remote of "Server with Remote and Package Options"
// (hybrid-mcp, X-API-Key header). Changed so they run here: the npm package is the installed
// server-everything (its version, `stdio` argument), the remote's URL is a local
// server-everything over streamable HTTP, the PyPI package the reference server
// mcp-server-time, which runs for real through `uvx` (uv from PyPI; `npm test` installs it
// into .ci/uv when it is not on PATH, see scripts/uv.mjs) and is downloaded from PyPI on its
// first start.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { bin, call, connect, isolatedEnv, root, startHttpEverything, writeConfig } from './helpers.mjs';
import { installedUvBin } from '../scripts/uv.mjs';

const everythingVersion = JSON.parse(readFileSync(join(root, 'node_modules/@modelcontextprotocol/server-everything/package.json'), 'utf8')).version;
const BRAVE_KEY = 'BSA-test-1f6c0e4d9a2b7e35';
const REMOTE_KEY = 'rk-test-77d01c9e4b2a6f83';
// `npm test` puts uvx on PATH; run alone after it, the test finds the one it installed.
const pathWithUvx = [installedUvBin(root), process.env.PATH].filter(Boolean).join(delimiter);

function braveSearch() {
  return {
    $schema: 'https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json',
    name: 'io.modelcontextprotocol.anonymous/brave-search',
    description: 'MCP server for Brave Search API integration',
    title: 'Brave Search',
    repository: { url: 'https://github.com/modelcontextprotocol/servers', source: 'github' },
    version: '1.0.2',
    packages: [{
      registryType: 'npm',
      registryBaseUrl: 'https://registry.npmjs.org',
      identifier: '@modelcontextprotocol/server-everything',
      version: everythingVersion,
      transport: { type: 'stdio' },
      packageArguments: [{ type: 'positional', value: 'stdio' }],
      environmentVariables: [{ name: 'BRAVE_API_KEY', description: 'Brave Search API Key', isRequired: true, isSecret: true }],
    }],
    _meta: { 'io.modelcontextprotocol.registry/publisher-provided': { tool: 'npm-publisher', version: '1.0.1' } },
  };
}

// The "Python Package Example" pointed at a real PyPI server: the official reference server
// mcp-server-time (modelcontextprotocol/servers, MIT License), which uvx downloads from PyPI
// when the gateway starts it. Its required secret variable is the example's (the time server
// ignores it): it shows a PyPI server's secret written as a reference only.
const TIME_VERSION = '2026.10.19';
const time = {
  $schema: 'https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json',
  name: 'io.github.modelcontextprotocol/time',
  description: 'A Model Context Protocol server providing tools for time queries and timezone conversions',
  title: 'Time',
  version: TIME_VERSION,
  packages: [{
    registryType: 'pypi',
    registryBaseUrl: 'https://pypi.org',
    identifier: 'mcp-server-time',
    version: TIME_VERSION,
    runtimeHint: 'uvx',
    transport: { type: 'stdio' },
    packageArguments: [{ type: 'named', name: '--local-timezone', description: 'IANA timezone used as the local one', value: 'UTC' }],
    environmentVariables: [
      { name: 'TIME_API_KEY', description: 'API key for the time service', isRequired: true, isSecret: true },
      { name: 'TIME_FORMAT', description: 'Output format', default: 'iso' },
    ],
  }],
};

function hybrid(url) {
  return {
    $schema: 'https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json',
    name: 'io.modelcontextprotocol.anonymous/hybrid-mcp',
    description: 'MCP server available as both local package and remote service',
    version: '1.5.0',
    remotes: [{
      type: 'streamable-http',
      url,
      headers: [
        { name: 'X-API-Key', description: 'API key for authentication', isRequired: true, isSecret: true },
        { name: 'X-Region', description: 'Service region', default: 'us-east-1', choices: ['us-east-1', 'eu-west-1', 'ap-southeast-1'] },
      ],
    }],
  };
}

/** A registry on 127.0.0.1: `mode` 'ok', 'garbage' (not JSON) or 'hang' (never answers). */
function startRegistry(documents, mode = 'ok') {
  const asked = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    asked.push(url.pathname + url.search);
    if (mode === 'hang') return; // never answers
    if (mode === 'garbage') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>maintenance</html>');
      return;
    }
    if (url.pathname !== '/v0/servers') {
      res.writeHead(404).end();
      return;
    }
    const search = url.searchParams.get('search') ?? '';
    const servers = documents
      .filter((d) => d.name.includes(search))
      .map((server) => ({ server, _meta: { 'io.modelcontextprotocol.registry/official': { status: 'active', isLatest: true } } }));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ servers, metadata: { count: servers.length } }));
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${server.address().port}`, asked, close: () => server.close() }));
  });
}

/** Run the bin without blocking this process: the registry answering it lives here. */
function run(env, args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { env, cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => { stdout += c; });
    child.stderr.on('data', (c) => { stderr += c; });
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

const configOf = (env) => join(env.HOME, '.anygpt/mcp-discovery.config.json');

describe('add, remove and registry search against a local registry', () => {
  let registry;
  let remote;
  before(async () => {
    remote = await startHttpEverything();
    registry = await startRegistry([braveSearch(), time, hybrid(remote.url)]);
  });
  after(() => {
    registry.close();
    remote.child.kill();
  });

  test('registry search lists name, description, version and how each would run', async () => {
    const env = isolatedEnv();
    const out = await run(env, ['registry', 'search', 'anonymous', '--registry', registry.url, '--json']);
    assert.equal(out.status, 0, out.stderr);
    const { servers } = JSON.parse(out.stdout);
    assert.deepEqual(servers.map((s) => [s.name, s.version, s.runs]), [
      ['io.modelcontextprotocol.anonymous/brave-search', '1.0.2', `npx -y @modelcontextprotocol/server-everything@${everythingVersion} stdio`],
      ['io.modelcontextprotocol.anonymous/hybrid-mcp', '1.5.0', `remote ${remote.url} (streamable-http)`],
    ]);
    const none = await run(env, ['registry', 'search', 'zzz-nothing', '--registry', registry.url]);
    assert.equal(none.status, 2);
    // The config's `discovery.registry` names it too.
    const config = writeConfig({ discovery: { servers: [], registry: registry.url } });
    const configured = await run(env, ['registry', 'search', 'time', '--config', config, '--json']);
    assert.equal(configured.status, 0, configured.stderr);
    assert.deepEqual(JSON.parse(configured.stdout).servers.map((s) => s.name), ['io.github.modelcontextprotocol/time']);
  });

  test('an npm server, a PyPI server and a remote with a header secret end up in the config, secrets as references only, and run', async () => {
    const env = isolatedEnv({ ANYGPT_DISCOVERY_REGISTRY: registry.url, PATH: pathWithUvx });
    const npm = await run(env, ['add', 'io.modelcontextprotocol.anonymous/brave-search', '--env', `BRAVE_API_KEY=${BRAVE_KEY}`, '--json']);
    assert.equal(npm.status, 0, npm.stderr);
    assert.deepEqual(JSON.parse(npm.stdout).secrets, ['BRAVE_SEARCH_BRAVE_API_KEY']);
    const pypi = await run(env, ['add', 'io.github.modelcontextprotocol/time', '--env', 'TIME_API_KEY=tk-test-0c9d8e7f6a5b', '--json']);
    assert.equal(pypi.status, 0, pypi.stderr);
    const hybridAdded = await run(env, ['add', 'io.modelcontextprotocol.anonymous/hybrid-mcp', '--name', 'remote', '--env', `X-API-Key=${REMOTE_KEY}`]);
    assert.equal(hybridAdded.status, 0, hybridAdded.stderr);
    assert.match(hybridAdded.stdout, /added remote \(remote http:\/\/127\.0\.0\.1:\d+\/mcp \(streamable-http\)\)/);

    const text = readFileSync(configOf(env), 'utf8');
    for (const value of [BRAVE_KEY, REMOTE_KEY, 'tk-test-0c9d8e7f6a5b']) assert.ok(!text.includes(value), `${value} in the config`);
    const servers = JSON.parse(text).discovery.servers;
    assert.deepEqual(servers.map((s) => s.name), ['brave-search', 'time', 'remote']);
    assert.deepEqual(servers[0].connection, {
      type: 'stdio',
      command: 'npx',
      args: ['-y', `@modelcontextprotocol/server-everything@${everythingVersion}`, 'stdio'],
      env: { BRAVE_API_KEY: '${secret:BRAVE_SEARCH_BRAVE_API_KEY}' },
    });
    assert.deepEqual(servers[1].connection, {
      type: 'stdio',
      command: 'uvx',
      args: [`mcp-server-time==${TIME_VERSION}`, '--local-timezone', 'UTC'],
      env: { TIME_API_KEY: '${secret:TIME_TIME_API_KEY}' },
    });
    assert.deepEqual(servers[2].connection, { type: 'http', url: remote.url, headers: { 'X-API-Key': '${secret:REMOTE_X_API_KEY}' } });
    const listed = JSON.parse((await run(env, ['secret', 'list', '--json'])).stdout).secrets.map((s) => s.name);
    assert.deepEqual(listed, ['BRAVE_SEARCH_BRAVE_API_KEY', 'REMOTE_X_API_KEY', 'TIME_TIME_API_KEY']);

    // All three run through the gateway: npx finds the installed package, uvx downloads
    // mcp-server-time from PyPI on its first start (seconds, more on a slow network: the time
    // server gets a generous startup budget, the only change to what `add` wrote).
    const written = JSON.parse(text);
    written.discovery.servers[1].startupTimeoutMs = 180_000;
    writeFileSync(configOf(env), JSON.stringify(written, null, 2));
    const gateway = await connect(process.execPath, [bin], { ...env });
    try {
      const slow = { timeout: 200_000 };
      // Waits for the first start (list_tools does), so the search below sees its tools.
      const listed = await gateway.client.callTool({ name: 'list_tools', arguments: { server: 'time' } }, undefined, slow);
      assert.match(listed.content[0].text, /get_current_time/);
      const { body: found } = await call(gateway.client, 'search_tools', { query: 'current time in a timezone' });
      assert.ok(found.results.some((r) => r.server === 'time' && r.tool === 'get_current_time'), JSON.stringify(found));
      const now = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'time', tool: 'get_current_time', arguments: { timezone: 'UTC' } } }, undefined, slow);
      assert.ok(!now.isError, JSON.stringify(now));
      const answer = JSON.parse(now.content[0].text);
      assert.equal(answer.timezone, 'UTC');
      assert.ok(Math.abs(Date.parse(answer.datetime) - Date.now()) < 120_000, `${answer.datetime} is not now`);
      for (const server of ['brave-search', 'remote']) {
        const echo = await gateway.client.callTool({ name: 'execute_tool', arguments: { server, tool: 'echo', arguments: { message: `via ${server}` } } });
        assert.deepEqual(echo.content, [{ type: 'text', text: `Echo: via ${server}` }], JSON.stringify(echo));
      }
      const printed = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'brave-search', tool: 'get-env', arguments: {} } });
      assert.match(printed.content[0].text, /"BRAVE_API_KEY": "\*\*\*"/);
    } finally {
      await gateway.client.close();
    }
    for (const value of [BRAVE_KEY, REMOTE_KEY, 'tk-test-0c9d8e7f6a5b']) assert.ok(!gateway.stderr().includes(value), `${value} in stderr`);

    const again = await run(env, ['add', 'io.github.modelcontextprotocol/time', '--env', 'TIME_API_KEY=x']);
    assert.equal(again.status, 1, 'a name in use');
    assert.match(again.stderr, /already has a server named `time`/);
    const removed = await run(env, ['remove', 'time']);
    assert.equal(removed.status, 0, removed.stderr);
    assert.deepEqual(JSON.parse(readFileSync(configOf(env), 'utf8')).discovery.servers.map((s) => s.name), ['brave-search', 'remote']);
    assert.equal((await run(env, ['remove', 'time'])).status, 2);
  });

  test('a required value missing without a terminal, or a name the registry lacks: a clear error, nothing written', async () => {
    const env = isolatedEnv({ ANYGPT_DISCOVERY_REGISTRY: registry.url });
    const missing = await run(env, ['add', 'io.github.modelcontextprotocol/time']);
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /`TIME_API_KEY` is required \(API key for the time service\): pass --env TIME_API_KEY=VALUE/);
    const unknown = await run(env, ['add', 'io.github.modelcontextprotocol/tme']);
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /modelcontextprotocol\/tme/);
    assert.throws(() => readFileSync(configOf(env)), /ENOENT/);
  });

  test('npm: and https: references need no registry', async () => {
    const env = isolatedEnv({ ANYGPT_DISCOVERY_REGISTRY: 'http://127.0.0.1:9' });
    assert.equal((await run(env, ['add', `npm:@modelcontextprotocol/server-everything@${everythingVersion}`, '--name', 'everything'])).status, 0);
    assert.equal((await run(env, ['add', 'pypi:mcp-server-time==1.0', '--name', 'time'])).status, 0);
    assert.equal((await run(env, ['add', remote.url, '--name', 'direct'])).status, 0);
    const servers = JSON.parse(readFileSync(configOf(env), 'utf8')).discovery.servers;
    assert.deepEqual(servers.map((s) => [s.name, s.connection.command ?? s.connection.url]), [
      ['everything', 'npx'],
      ['time', 'uvx'],
      ['direct', remote.url],
    ]);
  });
});

describe('a registry that fails', () => {
  for (const mode of ['garbage', 'hang']) {
    test(`one that ${mode === 'hang' ? 'never answers' : 'answers garbage'}: a clear error (exit 2), nothing written`, async () => {
      const broken = await startRegistry([], mode);
      try {
        const env = isolatedEnv();
        const started = Date.now();
        const out = await new Promise((resolve) => {
          const child = spawn(process.execPath, [bin, 'add', 'io.github.modelcontextprotocol/time', '--registry', broken.url, '--env', 'TIME_API_KEY=x'], { env, cwd: root });
          let stderr = '';
          child.stderr.on('data', (c) => { stderr += c; });
          child.on('exit', (status) => resolve({ status, stderr }));
        });
        assert.equal(out.status, 2, out.stderr);
        const why = mode === 'hang' ? /did not answer within 5 s/ : /answered something that is not a server list/;
        assert.match(out.stderr, why);
        assert.match(out.stderr, /nothing was written/);
        assert.ok(Date.now() - started < 20_000);
        assert.throws(() => readFileSync(configOf(env)), /ENOENT/);
      } finally {
        broken.close();
      }
    });
  }
});
