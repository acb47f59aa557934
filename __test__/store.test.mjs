// The shared store (`discovery.store`) between two real `serve --http` replicas and a real
// redis-server: a replica started after another serves the catalog from the store without
// starting the downstream server, and a replica whose store does not answer at start says so
// on /readyz until it does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';

import { eventually, freePort, serveHttp, raw2026, answerOf, serverPaths, tempDir, bin, writeConfig, isolatedEnv, listening, root } from './helpers.mjs';

/** Resolves once the async `predicate` holds; fails after `ms`. */
async function until(predicate, ms, what) {
  if (!(await eventually(predicate, ms, 50))) throw new Error(`not within ${ms} ms: ${what}`);
}

function startRedis(port) {
  const dir = tempDir('anygpt-redis-');
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: 'ignore',
  });
  return child;
}

async function redisUp(port) {
  await until(() => spawnSync('redis-cli', ['-p', String(port), 'ping']).stdout?.toString().trim() === 'PONG', 10_000, 'redis answers');
}

async function readyz(base) {
  const response = await fetch(`${base}/readyz`);
  return { status: response.status, body: await response.json() };
}

async function tool(url, name, args) {
  const answer = await answerOf(await raw2026(url, 'tools/call', { name, arguments: args }));
  assert.ok(answer.result, JSON.stringify(answer));
  return answer.result.content[0].text;
}

const memory = () => ({
  name: 'memory',
  connection: { command: process.execPath, args: [serverPaths.memory], env: { MEMORY_FILE_PATH: `${tempDir()}/memory.jsonl` } },
});

test('a replica started after another answers from the store without starting the server', async (t) => {
  const port = await freePort();
  const redis = startRedis(port);
  t.after(() => redis.kill());
  await redisUp(port);
  const servers = [memory()];
  const store = { url: `redis://127.0.0.1:${port}`, prefix: 'replicas-test' };

  const first = await serveHttp(servers, { discovery: { store } });
  t.after(() => first.child.kill());
  // The first replica has no snapshot: it starts the server, lists its tools and shares them.
  await until(async () => (await readyz(first.base)).status === 200, 20_000, 'first ready');
  await until(async () => (await tool(first.url, 'list_mcp_servers', {})).includes('connected'), 20_000, 'first connected');
  await until(
    () => spawnSync('redis-cli', ['-p', String(port), '--scan', '--pattern', 'replicas-test:catalog:*']).stdout.toString().trim() !== '',
    10_000,
    'the list is in the store',
  );

  const second = await serveHttp(servers, { discovery: { store } });
  t.after(() => second.child.kill());
  await until(async () => (await readyz(second.base)).status === 200, 20_000, 'second ready');
  const { body } = await readyz(second.base);
  assert.equal(body.store.up, true, JSON.stringify(body));
  const found = await tool(second.url, 'search_tools', { query: 'create entities in the knowledge graph' });
  assert.ok(found.includes('create_entities'), found);
  const listed = await tool(second.url, 'list_mcp_servers', {});
  assert.ok(listed.includes('idle') && !listed.includes('connected'), `the second replica did not start the server: ${listed}`);
});

test('a replica whose store does not answer at start is not ready, and says why, until it does', async (t) => {
  const port = await freePort();
  const store = { url: `redis://127.0.0.1:${port}`, prefix: 'late-store' };
  const replica = await serveHttp([memory()], { discovery: { store } });
  t.after(() => replica.child.kill());
  await until(async () => (await readyz(replica.base)).body.reason?.includes('does not answer'), 20_000, 'not ready, with the reason');
  const { status, body } = await readyz(replica.base);
  assert.equal(status, 503);
  assert.match(body.reason, /store redis:\/\/127\.0\.0\.1:\d+ does not answer/);

  const redis = startRedis(port);
  t.after(() => redis.kill());
  await redisUp(port);
  // The change subscription reconnects by itself and reads the catalog: ready.
  await until(async () => (await readyz(replica.base)).status === 200, 20_000, 'ready once the store answers');
  assert.ok(replica.stderr().includes('does not answer'), replica.stderr());
});

test('rate limits are shared by replicas: the third call within the burst on either replica waits, told how long', async (t) => {
  const port = await freePort();
  const redis = startRedis(port);
  t.after(() => redis.kill());
  await redisUp(port);
  const discovery = {
    store: { url: `redis://127.0.0.1:${port}`, prefix: 'rate-test' },
    rateLimits: { perCaller: { callsPerSecond: 0.05, burst: 2 } },
  };
  const servers = [memory()];
  const [a, b] = [await serveHttp(servers, { discovery }), await serveHttp(servers, { discovery })];
  t.after(() => a.child.kill());
  t.after(() => b.child.kill());
  for (const replica of [a, b]) await until(async () => (await readyz(replica.base)).status === 200, 20_000, 'ready');
  const execute = (replica) => tool(replica.url, 'execute_tool', { server: 'memory', tool: 'read_graph', arguments: {} });
  assert.ok(!(await execute(a)).includes('RATE_LIMITED'));
  assert.ok(!(await execute(b)).includes('RATE_LIMITED'));
  const refused = JSON.parse(await execute(a));
  assert.equal(refused.error.code, 'RATE_LIMITED', JSON.stringify(refused));
  assert.match(refused.error.message, /caller local may make 0\.05 calls a second \(bursts of 2\); retry after \d+\.\d s/);
  assert.ok(refused.error.retryAfterMs > 10_000 && refused.error.retryAfterMs <= 20_000, JSON.stringify(refused));
});

test("the store's URL and key are the gateway's: a stdio server does not inherit their variables", async (t) => {
  const port = await freePort();
  const redis = startRedis(port);
  t.after(() => redis.kill());
  await redisUp(port);
  const config = writeConfig({
    discovery: {
      store: { url: '${TEST_STORE_URL}', key: '${TEST_STORE_KEY}', prefix: 'env-test' },
      servers: [{ name: 'everything', connection: { command: process.execPath, args: [serverPaths.everything] } }],
    },
  });
  const env = isolatedEnv({
    TEST_STORE_URL: `redis://127.0.0.1:${port}`,
    TEST_STORE_KEY: 'MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=',
    TEST_OTHER_VARIABLE: 'inherited',
  });
  const child = spawn(process.execPath, [bin, 'serve', '--http', '127.0.0.1:0', '--config', config], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const replica = await listening(child);
  t.after(() => child.kill());
  await until(async () => (await readyz(replica.base)).status === 200, 20_000, 'ready');
  const printed = await tool(replica.url, 'execute_tool', { server: 'everything', tool: 'get-env', arguments: {} });
  assert.ok(printed.includes('TEST_OTHER_VARIABLE'), printed.slice(0, 400));
  assert.ok(!printed.includes('TEST_STORE_URL') && !printed.includes('TEST_STORE_KEY'), printed.slice(0, 2000));
});

test('tool pins are the team\'s: the first replica to see a tool pins it, and trusting it on one replica trusts it on all', async (t) => {
  const port = await freePort();
  const redis = startRedis(port);
  t.after(() => redis.kill());
  await redisUp(port);
  const store = { url: `redis://127.0.0.1:${port}`, prefix: 'pins-test' };
  const listing = (extra) => [
    { name: 'tools', connection: { command: process.execPath, args: [`${root}/__test__/fixtures/listing-server.mjs`, '--count', '3', ...extra] } },
  ];
  const first = await serveHttp(listing([]), { discovery: { store } });
  t.after(() => first.child.kill());
  await until(async () => (await readyz(first.base)).status === 200, 20_000, 'first ready');
  await until(async () => (await tool(first.url, 'list_tools', { server: 'tools' })).includes('t3'), 20_000, 'first lists t3');
  await until(() => spawnSync('redis-cli', ['-p', String(port), 'hlen', 'pins-test:pins:tools']).stdout.toString().trim() === '3', 10_000, 'pins in the store');

  // The second replica's server says something else of the same tools (longer descriptions).
  const secondConfig = writeConfig({ discovery: { servers: listing(['--pad', '12']), store } });
  const secondEnv = isolatedEnv();
  const child = spawn(process.execPath, [bin, 'serve', '--http', '127.0.0.1:0', '--config', secondConfig], { env: secondEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const second = await listening(child);
  t.after(() => child.kill());
  await until(async () => (await readyz(second.base)).status === 200, 20_000, 'second ready');
  await until(async () => (await tool(second.url, 'list_tools', { server: 'tools' })).includes('changed'), 20_000, 'marked changed on the second replica');

  // Trusted from the command line, on the second replica's config: both see it.
  const trusted = spawnSync(process.execPath, [bin, 'trust', 'tools', '--config', secondConfig], { env: secondEnv, encoding: 'utf8' });
  assert.equal(trusted.status, 0, trusted.stderr);
  await until(async () => !(await tool(second.url, 'list_tools', { server: 'tools' })).includes('changed'), 20_000, 'trusted on the second replica');
  // The first replica's server still says the old version: to the team it now differs from what was trusted.
  await until(async () => (await tool(first.url, 'list_tools', { server: 'tools' })).includes('changed'), 20_000, 'the first replica follows the trust');
});

test('a reload naming another store or other HTTP settings says they apply at the next start, and applies the rest', async (t) => {
  const { writeFileSync } = await import('node:fs');
  const config = writeConfig({ discovery: { servers: [] } });
  const replica = await listening(
    spawn(process.execPath, [bin, 'serve', '--http', '127.0.0.1:0', '--config', config], { env: isolatedEnv(), stdio: ['ignore', 'ignore', 'pipe'] }),
  );
  t.after(() => replica.child.kill());
  await until(async () => /watching the config/.test(replica.stderr()), 10_000, 'watching');
  writeFileSync(
    config,
    JSON.stringify({
      discovery: {
        servers: [memory()],
        store: { url: `redis://127.0.0.1:${await freePort()}` },
        http: { allowedHosts: ['gateway.example.test'] },
      },
    }),
  );
  await until(async () => /config reloaded/.test(replica.stderr()), 15_000, 'reloaded');
  const log = replica.stderr();
  assert.match(log, /discovery\.store changed: the new store is used after a restart/);
  assert.match(log, /discovery\.http changed: `serve --http` applies it at its next start/);
  assert.match(log, /config reloaded .*added=1 \(memory\)/);
});
