// Secrets of stdio servers never leave the gateway: a server started with `API_TOKEN=sk-live-…`
// in its env and `--token=…` / `--api-key …` on its command line, which quotes them in its tool
// descriptions, results, errors, stderr and dying words (fixtures/leaky-server.mjs), is driven
// through the real bin with the official client. The secrets must be absent from every answer,
// every log line at trace level, getConfig(), the audit file and the snapshot files.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { DiscoveryEngine } from '../index.js';
import { bin, call, connect, isolatedEnv, referenceServer, root, tempDir, writeConfig } from './helpers.mjs';

const leaky = join(root, '__test__/fixtures/leaky-server.mjs');
const ENV_TOKEN = 'sk-live-4f9a8b7c6d5e4f3a2b1c';
const FLAG_TOKEN = 'tok-9z8y7x6w5v';
const API_KEY = 'k3y-a1b2c3d4e5';
const EXPANDED = 'sk-live-expanded-77aa88bb99cc';
// `-H "Authorization: Bearer <JWT>"` and `--header "X-Api-Key: …"`, as mcp-remote takes them.
const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJsZWFreSJ9.c2lnbmF0dXJlLXZhbHVlMTIz';
const HEADER_KEY = 'hdr-key-6c5b4a39';
// A hosted server's key in its URL path, and a key pasted into a server's description.
const PATH_KEY = 'sk-ak-Zq81vTz0LmR2pW9sKd4Fx7';
const DESCRIPTION_KEY = 'sk-proj-Desc9f8e7d6c5b4a3210';
const SECRETS = [ENV_TOKEN, FLAG_TOKEN, API_KEY, EXPANDED, JWT, HEADER_KEY, PATH_KEY, DESCRIPTION_KEY];

const server = (name, args, env) => ({
  name,
  connection: { command: process.execPath, args: [leaky, ...args], env },
});

const config = {
  discovery: {
    servers: [
      { ...server('leaky', [`--token=${FLAG_TOKEN}`, '--api-key', API_KEY], { API_TOKEN: ENV_TOKEN }), description: `Team tools (key ${DESCRIPTION_KEY})` },
      server('dying', ['--die-at-start', `--token=${FLAG_TOKEN}`], { API_TOKEN: ENV_TOKEN }),
      // Expanded at launch from the gateway's own environment: registered as expanded.
      server('expanded', [], { API_TOKEN: '${LEAKY_EXPANDED_TOKEN}' }),
      server('headers', ['-H', `Authorization: Bearer ${JWT}`, '--header', `X-Api-Key: ${HEADER_KEY}`], {}),
      // Nothing listens there: its status and logs quote the URL.
      { name: 'zapier', connection: { type: 'http', url: `http://127.0.0.1:9/mcp/${PATH_KEY}/sse` } },
    ],
    // Values in the audit file too: the model passes a secret it should not have.
    audit: { includeArguments: true },
  },
};

function assertNoSecret(text, where) {
  for (const secret of SECRETS) {
    assert.ok(!text.includes(secret), `${where} holds ${secret}:\n${text.slice(0, 4000)}`);
  }
}

test('no secret of a stdio server reaches an answer, a log line, getConfig, the audit log or a snapshot', async () => {
  const cacheDir = tempDir('anygpt-discovery-cache-');
  const stateDir = tempDir('anygpt-discovery-state-');
  const gateway = await connect(process.execPath, [bin, '--config', writeConfig(config), '--log-level', 'trace'], {
    ANYGPT_DISCOVERY_CACHE_DIR: cacheDir,
    ANYGPT_DISCOVERY_STATE_DIR: stateDir,
    LEAKY_EXPANDED_TOKEN: EXPANDED,
  });
  const answers = [];
  const ask = async (name, args) => {
    const answer = await call(gateway.client, name, args);
    answers.push(JSON.stringify(answer.result));
    return answer.body;
  };
  try {
    const servers = await ask('list_mcp_servers');
    const dying = servers.servers.find((s) => s.name === 'dying');
    assert.equal(dying.status, 'error', JSON.stringify(dying));
    assert.match(dying.error, /\*\*\*/, 'the dying words are kept, the token masked');
    assert.equal(servers.servers.find((s) => s.name === 'leaky').description, 'Team tools (key ***)');
    const zapier = servers.servers.find((s) => s.name === 'zapier');
    // Refused at once: `error`, or `connecting` while it retries; either way the error says why.
    assert.ok(['error', 'connecting'].includes(zapier.status), JSON.stringify(zapier));
    assert.match(zapier.error, /127\.0\.0\.1:9\/mcp\/\*\*\*\/sse/, 'the URL is shown, its key masked');

    await ask('search_tools', { query: 'token belongs' });
    await ask('list_tools', { server: 'leaky' });
    const whoami = await ask('get_tool_details', { server: 'leaky', tool: 'whoami' });
    assert.equal(whoami.description, 'Who the token *** belongs to.');

    const leak = await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'leaky', tool: 'leak', arguments: { note: ENV_TOKEN } },
    });
    answers.push(JSON.stringify(leak));
    assert.equal(leak.content[0].text, `API_TOKEN=***; argv: --token=*** --api-key ***`);

    const links = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'leaky', tool: 'links' } });
    answers.push(JSON.stringify(links));
    const [link, embedded, blob, glued] = links.content;
    assert.equal(link.uri, 'https://api.example.com/files?access_token=***');
    assert.equal(link.name, 'report-***');
    assert.equal(link.title, 'Report for ***');
    assert.equal(link.description, 'Signed with ***; args --token=*** --api-key ***');
    assert.deepEqual(link._meta, { token: '***' });
    assert.equal(link.icons[0].src, 'https://cdn.example.com/icon.png?sig=***');
    assert.equal(embedded.resource.uri, 'secret://***/notes');
    assert.equal(embedded.resource.text, 'notes of ***');
    assert.equal(blob.resource.uri, 'blob://***');
    assert.equal(glued.text, 'glued: auth_***x;token=***; key=***&v=1 "Bearer ***"');

    const headers = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'headers', tool: 'leak' } });
    answers.push(JSON.stringify(headers));
    assert.equal(headers.content[0].text, 'API_TOKEN=; argv: -H Authorization: *** --header X-Api-Key: ***');

    const unreachable2 = await ask('execute_tool', { server: 'zapier', tool: 'anything' });
    assert.ok(unreachable2.error, JSON.stringify(unreachable2));

    const fail = await ask('execute_tool', { server: 'leaky', tool: 'fail' });
    assert.equal(fail.error.code, 'TOOL_EXECUTION_ERROR');
    assert.match(fail.error.message, /refused token \*\*\* \(started as: --token=\*\*\* --api-key \*\*\*\)/);

    const crash = await ask('execute_tool', { server: 'leaky', tool: 'crash' });
    assert.equal(crash.error.code, 'TOOL_EXECUTION_ERROR');

    const unreachable = await ask('execute_tool', { server: 'dying', tool: 'ping' });
    assert.equal(unreachable.error.code, 'SERVER_CONNECTION_ERROR');
    assert.match(unreachable.error.message, /\*\*\*/);

    const expanded = await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'expanded', tool: 'whoami' },
    });
    answers.push(JSON.stringify(expanded));
    assert.equal(expanded.content[0].text, 'you are the holder of ***');
  } finally {
    await gateway.client.close();
  }

  for (const [i, answer] of answers.entries()) assertNoSecret(answer, `answer ${i}`);

  const stderr = gateway.stderr();
  assert.match(stderr, /DEBUG/, 'the log ran at trace level (what it emits is DEBUG here)');
  assert.match(stderr, /\[leaky\] start: API_TOKEN=\*\*\* args: --token=\*\*\* --api-key \*\*\*/, stderr.slice(0, 2000));
  assertNoSecret(stderr, 'stderr');
  // rmcp's message dumps (argument values) need --log-arguments.
  assert.ok(!stderr.includes('received request'), 'no message dump without --log-arguments');

  const audit = readFileSync(join(stateDir, 'audit.jsonl'), 'utf8');
  assert.ok(audit.split('\n').filter(Boolean).length >= 5, audit);
  assert.match(audit, /"note":"\*\*\*"/);
  assertNoSecret(audit, 'the audit log');

  const catalog = join(cacheDir, 'catalog');
  const snapshots = readdirSync(catalog).filter((name) => name.endsWith('.json'));
  assert.ok(snapshots.some((name) => name.startsWith('leaky-')), snapshots.join());
  for (const name of snapshots) {
    const bytes = readFileSync(join(catalog, name), 'utf8');
    assertNoSecret(bytes, `snapshot ${name}`);
    if (name.startsWith('leaky-')) assert.match(bytes, /Who the token \*\*\* belongs to/);
  }
});

test('getConfig() hides env values, URL credentials and credential arguments, keeps references', () => {
  const engine = new DiscoveryEngine({
    discovery: {
      servers: [
        ...config.discovery.servers,
        {
          name: 'remote',
          connection: {
            type: 'http',
            url: `https://user:${API_KEY}@api.example.com/mcp?api_key=${ENV_TOKEN}&format=json`,
            headers: { Authorization: `Bearer ${FLAG_TOKEN}`, 'X-Ref': '${SOME_TOKEN}' },
          },
        },
      ],
    },
  });
  const shown = engine.getConfig();
  const text = JSON.stringify(shown);
  assertNoSecret(text, 'getConfig()');
  const [leakyShown, , expandedShown, headersShown, zapierShown, remoteShown] = shown.discovery.servers;
  assert.deepEqual(leakyShown.connection.args.slice(1), ['--token=***', '--api-key', '***']);
  assert.equal(leakyShown.description, 'Team tools (key ***)');
  assert.deepEqual(headersShown.connection.args.slice(1), ['-H', 'Authorization: ***', '--header', 'X-Api-Key: ***']);
  assert.equal(zapierShown.connection.url, 'http://127.0.0.1:9/mcp/***/sse');
  assert.equal(leakyShown.connection.env.API_TOKEN, '***');
  assert.equal(expandedShown.connection.env.API_TOKEN, '${LEAKY_EXPANDED_TOKEN}');
  assert.equal(remoteShown.connection.url, 'https://user:***@api.example.com/mcp?api_key=***&format=json');
  assert.equal(remoteShown.connection.headers['X-Ref'], '${SOME_TOKEN}');
});

test('--log-arguments lets debug logs show argument values (secrets still masked)', async () => {
  const gateway = await connect(
    process.execPath,
    [bin, '--config', writeConfig(config), '--log-level', 'debug', '--log-arguments'],
    { LEAKY_EXPANDED_TOKEN: EXPANDED },
  );
  try {
    await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'leaky', tool: 'ping', arguments: { note: 'visible-value', other: ENV_TOKEN } },
    });
  } finally {
    await gateway.client.close();
  }
  const stderr = gateway.stderr();
  assert.match(stderr, /visible-value/);
  assertNoSecret(stderr, 'stderr with --log-arguments');
});

test('without --log-arguments debug logs show argument keys, never values', async () => {
  const gateway = await connect(process.execPath, [bin, '--config', writeConfig(config), '--log-level', 'debug'], {
    LEAKY_EXPANDED_TOKEN: EXPANDED,
  });
  try {
    await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'leaky', tool: 'ping', arguments: { note: 'hidden-value' } },
    });
  } finally {
    await gateway.client.close();
  }
  const stderr = gateway.stderr();
  assert.match(stderr, /execute_tool.*argument_keys=\["note"\]/);
  assert.ok(!stderr.includes('hidden-value'), stderr.slice(0, 4000));
});

test("credentials in the gateway's own environment, which servers inherit, are masked in results", async () => {
  // server-everything's real `get-env` returns its whole environment: the gateway's, inherited.
  const apiKey = 'sk-proj-inherited0123456789abcdef';
  const awsSecret = 'wJalrXUtnFEMIinherited7MDENGbPxRfiCY';
  const gateway = await connect(process.execPath, [bin, '--config', writeConfig({ discovery: { servers: [referenceServer('everything')] } })], {
    SOME_SERVICE_API_KEY: apiKey,
    AWS_SECRET_ACCESS_KEY: awsSecret,
    DESKTOP_SESSION: 'plainsession',
  });
  try {
    const { result } = await call(gateway.client, 'execute_tool', { server: 'everything', tool: 'get-env', arguments: {} });
    const text = JSON.stringify(result);
    assert.ok(!result.isError, text.slice(0, 2000));
    assert.match(text, /SOME_SERVICE_API_KEY/, 'the variable is there, its value masked');
    assert.ok(!text.includes(apiKey) && !text.includes(awsSecret), `an inherited credential reached the model:\n${text.slice(0, 4000)}`);
    assert.match(text, /plainsession/, 'an ordinary setting under a credential-ish name is not masked');
  } finally {
    await gateway.client.close();
  }
});

test('`config show` hides header arguments, URL path keys and keys in descriptions', () => {
  const done = spawnSync(process.execPath, [bin, '--config', writeConfig(config), 'config', 'show'], {
    env: isolatedEnv({ LEAKY_EXPANDED_TOKEN: EXPANDED }),
    encoding: 'utf8',
    timeout: 60000,
  });
  assert.equal(done.status, 0, done.stderr);
  assertNoSecret(done.stdout + done.stderr, '`config show`');
  assert.match(done.stdout, /Authorization: \*\*\*/);
  assert.match(done.stdout, /\/mcp\/\*\*\*\/sse/);
});

// Real server names of the 328-server benchmark catalog that the key-shape rule once took for
// keys: given as arguments, their snapshots were written with `"server":"***"`, thrown away at
// every start, and every start launched them again.
test('servers whose names and arguments look like keys are served from their snapshots on the next start', async () => {
  const names = ['web3-research-mcp', 'destiny2-mcp-server', 'stdio-context7-mcp'];
  const snapshotConfig = writeConfig({
    discovery: {
      audit: { enabled: false },
      servers: names.map((name) => ({ name, connection: { command: process.execPath, args: [leaky, name, `--name=${name}`] } })),
    },
  });
  const cacheDir = tempDir('anygpt-discovery-cache-');
  const env = { ANYGPT_DISCOVERY_CACHE_DIR: cacheDir };
  const args = [bin, '--config', snapshotConfig, '--log-level', 'debug'];
  const first = await connect(process.execPath, args, env);
  try {
    for (const name of names) {
      const listed = await call(first.client, 'list_tools', { server: name });
      assert.ok(JSON.stringify(listed.body).includes('whoami'), JSON.stringify(listed.body));
    }
    const servers = await call(first.client, 'list_mcp_servers');
    assert.deepEqual(servers.body.servers.map((s) => s.name), names, 'names are never masked');
  } finally {
    await first.client.close();
  }
  assert.match(first.stderr(), /\[leaky\] start/, 'the first start launched the servers (their stderr is logged)');
  const catalog = join(cacheDir, 'catalog');
  for (const name of names) {
    const file = readdirSync(catalog).find((f) => f.startsWith(`${name}-`));
    assert.ok(file, `no snapshot of ${name}: ${readdirSync(catalog).join()}`);
    assert.equal(JSON.parse(readFileSync(join(catalog, file), 'utf8')).server, name);
  }

  const second = await connect(process.execPath, args, env);
  try {
    const found = await call(second.client, 'search_tools', { query: 'who the token belongs to' });
    const servers = new Set(found.body.results.map((r) => r.server));
    for (const name of names) assert.ok(servers.has(name), `${name} not served: ${JSON.stringify(found.body)}`);
  } finally {
    await second.client.close();
  }
  const stderr = second.stderr();
  assert.ok(!stderr.includes('[leaky] start'), `a server was started although its snapshot was fresh:\n${stderr.slice(0, 3000)}`);
  assert.ok(!/ignoring catalog snapshot/.test(stderr), stderr.slice(0, 3000));
});
