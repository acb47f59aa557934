// Team mode end to end: `serve --http` with OAuth access tokens from a local issuer whose keys
// this test makes (RS256, a JWK Set file), toolRules on callers, two users of different groups
// through the official SDK client. The issue's "Auth tests": no token / wrong audience / wrong
// issuer / expired / bad signature → 401 with the metadata pointer; insufficient scope → 403;
// two users see different search results and counts, one is refused at execute exactly as for
// a tool that does not exist (and a tool shown directly is shown to those who may run it
// only); the audit line names the caller.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { referenceServer, serveHttp, signedJwt, signingKey, tempDir } from './helpers.mjs';

const ISSUER = 'https://id.team.test/realms/team';
const SCOPE = 'mcp:tools';

/** An RS256 access token signed with `key`: `claims` over a valid default for `audience`. */
function accessToken(key, audience, claims = {}) {
  const now = Math.floor(Date.now() / 1000);
  return signedJwt(key, { iss: ISSUER, aud: audience, iat: now, exp: now + 600, scope: SCOPE, ...claims });
}

async function clientWith(url, token) {
  const client = new Client({ name: 'team-tests', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

async function meta(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  return { result, body: JSON.parse(result.content[0].text) };
}

/** A bare POST of `tools/list` with `headers`: what a client without a valid token gets. */
function post(url, headers = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } }),
  });
}

describe('team mode: OAuth access tokens and per-caller tools', () => {
  const dir = tempDir('anygpt-team-');
  const key = signingKey('team-key-1');
  const stranger = signingKey('team-key-1'); // same kid, another key: a forged signature
  const audit = join(dir, 'audit.jsonl');
  let gateway;
  let audience;

  before(async () => {
    const jwks = join(dir, 'jwks.json');
    writeFileSync(jwks, JSON.stringify({ keys: [key.jwk] }));
    gateway = await serveHttp([referenceServer('everything'), referenceServer('memory')], {
      discovery: {
        audit: { path: audit },
        expose: ['memory:read_graph'],
        http: { auth: { issuers: [{ issuer: ISSUER, jwksFile: jwks, requiredScopes: [SCOPE] }] } },
        toolRules: [
          // The memory server is for admins only.
          { server: 'memory', pattern: '*', enabled: true, callers: { groups: ['admins'] } },
          { server: 'memory', pattern: '*', enabled: false, callers: { subjects: ['*'] } },
        ],
      },
    });
    audience = gateway.url;
  });

  after(async () => {
    gateway?.child.kill('SIGTERM');
    await gateway?.exit;
  });

  test('no token or a bad one: 401 pointing at the resource metadata; a missing scope: 403', async () => {
    const metadataUrl = `${gateway.base}/.well-known/oauth-protected-resource/mcp`;
    const none = await post(gateway.url);
    assert.equal(none.status, 401);
    const challenge = none.headers.get('www-authenticate');
    assert.match(challenge, /^Bearer /);
    assert.ok(challenge.includes(`resource_metadata="${metadataUrl}"`), challenge);
    const metadata = await (await fetch(metadataUrl)).json();
    assert.equal(metadata.resource, gateway.url);
    assert.deepEqual(metadata.authorization_servers, [ISSUER]);

    const now = Math.floor(Date.now() / 1000);
    const bad = {
      'wrong audience': accessToken(key, 'https://elsewhere.test/mcp', { sub: 'alice' }),
      'wrong issuer': accessToken(key, audience, { sub: 'alice', iss: 'https://evil.test' }),
      expired: accessToken(key, audience, { sub: 'alice', iat: now - 7200, exp: now - 3600 }),
      'bad signature': accessToken(stranger, audience, { sub: 'alice' }),
    };
    for (const [what, token] of Object.entries(bad)) {
      const answer = await post(gateway.url, { authorization: `Bearer ${token}` });
      assert.equal(answer.status, 401, what);
      const header = answer.headers.get('www-authenticate');
      assert.match(header, /error="invalid_token"/, `${what}: ${header}`);
      assert.ok(header.includes(`resource_metadata="${metadataUrl}"`), `${what}: ${header}`);
      assert.ok(!(await answer.text()).includes(token), `${what}: the answer never quotes the token`);
    }
    // /metrics names every server and tool called, whoever called them: a token is needed.
    assert.equal((await fetch(`${gateway.base}/metrics`)).status, 401);
    const scraped = await fetch(`${gateway.base}/metrics`, { headers: { authorization: `Bearer ${accessToken(key, audience, { sub: 'prometheus' })}` } });
    assert.equal(scraped.status, 200);
    assert.match(await scraped.text(), /discovery_server_status/);
    assert.equal((await fetch(`${gateway.base}/healthz`)).status, 200, 'probes stay open');
    const unscoped = await post(gateway.url, { authorization: `Bearer ${accessToken(key, audience, { sub: 'alice', scope: 'profile' })}` });
    assert.equal(unscoped.status, 403);
    assert.match(unscoped.headers.get('www-authenticate'), /error="insufficient_scope"/);
    assert.match(unscoped.headers.get('www-authenticate'), new RegExp(`scope="${SCOPE}"`));
  });

  test('two users see different tools, counts and searches; the hidden tool is not found', async () => {
    const alice = await clientWith(gateway.url, accessToken(key, audience, { sub: 'alice', groups: ['admins'] }));
    const bob = await clientWith(gateway.url, accessToken(key, audience, { sub: 'bob', groups: ['devs'] }));
    try {
      const memoryOf = async (client) => (await meta(client, 'list_mcp_servers')).body.servers.find((s) => s.name === 'memory');
      // Counts come once the server listed its tools.
      for (let i = 0; i < 100 && !((await memoryOf(alice))?.toolCount > 0); i++) await new Promise((r) => setTimeout(r, 100));
      assert.ok((await memoryOf(alice)).toolCount > 0, JSON.stringify(await memoryOf(alice)));
      assert.equal((await memoryOf(bob)).toolCount, 0, JSON.stringify(await memoryOf(bob)));

      // A tool shown directly is shown only to callers who may run it.
      const listed = async (client) => (await client.listTools()).tools.map((t) => t.name);
      assert.ok((await listed(alice)).includes('memory__read_graph'), JSON.stringify(await listed(alice)));
      assert.ok(!(await listed(bob)).includes('memory__read_graph'), JSON.stringify(await listed(bob)));
      const direct = await bob.callTool({ name: 'memory__read_graph', arguments: {} }).catch((e) => e);
      assert.ok(direct instanceof Error && /unknown tool|not found/i.test(direct.message), String(direct?.message ?? JSON.stringify(direct)));

      const query = { query: 'read the knowledge graph', limit: 5 };
      const found = async (client) => (await meta(client, 'search_tools', query)).body.results ?? [];
      assert.ok((await found(alice)).some((r) => r.server === 'memory' && r.tool === 'read_graph'));
      assert.ok(!(await found(bob)).some((r) => r.server === 'memory'), JSON.stringify(await found(bob)));

      const run = { server: 'memory', tool: 'read_graph', arguments: {} };
      const allowed = await meta(alice, 'execute_tool', run);
      assert.notEqual(allowed.result.isError, true, JSON.stringify(allowed.result));
      const hidden = await meta(bob, 'execute_tool', run);
      assert.equal(hidden.result.isError, true);
      assert.equal(hidden.body.error.code, 'TOOL_NOT_FOUND');
      const missing = await meta(bob, 'execute_tool', { server: 'memory', tool: 'no_such_tool', arguments: {} });
      assert.equal(missing.body.error.code, 'TOOL_NOT_FOUND');
      assert.doesNotMatch(JSON.stringify(hidden.body), /forbidden|not allowed|permission/i);
      const details = await meta(bob, 'get_tool_details', { server: 'memory', tool: 'read_graph' });
      assert.equal(details.body.error.code, 'TOOL_NOT_FOUND');

      const lines = readFileSync(audit, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      const call = lines.find((l) => l.server === 'memory' && l.tool === 'read_graph');
      assert.equal(call.caller, `${ISSUER}#alice`);
      assert.ok(!readFileSync(audit, 'utf8').includes('eyJ'), 'no token in the audit log');
    } finally {
      await alice.close();
      await bob.close();
    }
  });
});
