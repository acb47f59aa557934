// Team mode end to end: `serve --http` with OAuth access tokens from a local issuer whose keys
// this test makes (RS256, a JWK Set file), toolRules on callers, two users of different groups
// through the official SDK client. The issue's "Auth tests": no token / wrong audience / wrong
// issuer / expired / bad signature → 401 with the metadata pointer; insufficient scope → 403;
// two users see different search results and counts, one is refused at execute exactly as for
// a tool that does not exist (and a tool shown directly is shown to those who may run it
// only); the audit line names the caller. Prompts, resources, templates and completions follow
// the tools: a caller from whom a server's every tool is hidden gets none of its offers, and a
// get, read, completion or subscription of one answers exactly as for a name no server has.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { referenceServer, root, serveHttp, signedJwt, signingKey, tempDir, waitFor } from './helpers.mjs';

const ISSUER = 'https://id.team.test/realms/team';
// server-everything lists it, and so does the `bare` fixture after it (prompts and resources,
// no tools).
const SHARED_URI = 'demo://resource/static/document/architecture.md';
const bare = {
  name: 'bare',
  connection: { command: process.execPath, args: [join(root, '__test__/fixtures/twin-resource-server.mjs'), '--no-tools'] },
};
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

/**
 * A 2026-07-28 `subscriptions/listen` of `notifications` with `token`, read as it comes:
 * `messages` fills up until `close()`.
 */
async function listen(url, token, notifications) {
  const controller = new AbortController();
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'team-listen', version: '0' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  const response = await fetch(url, {
    method: 'POST',
    signal: controller.signal,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2026-07-28',
      'Mcp-Method': 'subscriptions/listen',
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen', params: { notifications, _meta: meta } }),
  });
  assert.equal(response.status, 200);
  const messages = [];
  const done = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body) {
        buffer += decoder.decode(chunk, { stream: true });
        const lines = buffer.split('\n');
        buffer = lines.pop();
        for (const line of lines) if (line.startsWith('data:') && line.slice(5).trim()) messages.push(JSON.parse(line.slice(5)));
      }
    } catch {
      // aborted
    }
  })();
  return { messages, close: () => { controller.abort(); return done; } };
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
    gateway = await serveHttp([referenceServer('everything'), referenceServer('memory'), bare], {
      discovery: {
        audit: { path: audit },
        expose: ['memory:read_graph'],
        http: { auth: { issuers: [{ issuer: ISSUER, jwksFile: jwks, requiredScopes: [SCOPE] }] } },
        toolRules: [
          // The memory server is for admins only.
          { server: 'memory', pattern: '*', enabled: true, callers: { groups: ['admins'] } },
          { server: 'memory', pattern: '*', enabled: false, callers: { subjects: ['*'] } },
          // bob sees nothing of server-everything; carol nothing of the toolless `bare`.
          { server: 'everything', pattern: '*', enabled: false, callers: { subjects: ['bob'] } },
          { server: 'bare', pattern: '*', enabled: false, callers: { subjects: ['carol'] } },
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
    // A name the gateway does not serve is refused as such before any token is asked for
    // (DNS rebinding: the page never learns it reached an MCP server that wants a token).
    const rebound = await new Promise((resolve, reject) => {
      const request = httpRequest(gateway.url, { method: 'POST', headers: { host: 'rebound.example', 'content-type': 'application/json' } }, (response) => {
        let body = '';
        response.on('data', (chunk) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode, body, challenge: response.headers['www-authenticate'] }));
      });
      request.on('error', reject);
      request.end('{}');
    });
    assert.equal(rebound.status, 403, JSON.stringify(rebound));
    assert.equal(rebound.challenge, undefined);
    assert.match(rebound.body, /allowedHosts/);
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

      // /metrics counts the calls of every caller: bob, scraping with his own token, must not
      // learn of alice's hidden tool from her calls (he once read memory/read_graph there).
      const scrape = async (token) =>
        (await fetch(`${gateway.base}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text();
      const calledTool = /discovery_downstream_calls_total\{server="memory",tool="read_graph",outcome="ok"\} 1/;
      assert.match(await scrape(accessToken(key, audience, { sub: 'alice', groups: ['admins'] })), calledTool);
      const bobs = await scrape(accessToken(key, audience, { sub: 'bob', groups: ['devs'] }));
      assert.match(bobs, /discovery_server_status/);
      assert.doesNotMatch(bobs, /read_graph/, 'no call of a tool hidden from the scraping caller');

      const lines = readFileSync(audit, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      const call = lines.find((l) => l.server === 'memory' && l.tool === 'read_graph');
      assert.equal(call.caller, `${ISSUER}#alice`);
      assert.ok(!readFileSync(audit, 'utf8').includes('eyJ'), 'no token in the audit log');
    } finally {
      await alice.close();
      await bob.close();
    }
  });

  test("prompts, resources, templates and completions of a server hidden from a caller are missing to them", async () => {
    const token = (sub) => accessToken(key, audience, { sub, groups: ['devs'] });
    const [alice, bob, carol] = await Promise.all(['alice', 'bob', 'carol'].map((sub) => clientWith(gateway.url, token(sub))));
    try {
      const prompts = async (client) => (await client.listPrompts()).prompts.map((p) => p.name);
      const resources = async (client) => (await client.listResources()).resources.map((r) => r.uri);
      const templates = async (client) => (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);

      // alice sees everything's and bare's offers; the later lister of the shared URI is renamed.
      assert.ok((await prompts(alice)).includes('everything__simple-prompt'), (await prompts(alice)).join(', '));
      assert.ok((await prompts(alice)).includes('bare__twin-hello'));
      const aliceResources = await resources(alice);
      assert.ok(aliceResources.includes(SHARED_URI) && aliceResources.includes(`anygpt://bare/${SHARED_URI}`), aliceResources.join(', '));
      assert.ok((await templates(alice)).includes('demo://resource/dynamic/text/{resourceId}'));
      const read = await alice.readResource({ uri: 'demo://resource/dynamic/text/3' });
      assert.match(read.contents[0].text, /3/);
      const completed = await alice.complete({
        ref: { type: 'ref/prompt', name: 'everything__completable-prompt' },
        argument: { name: 'department', value: 'Eng' },
      });
      assert.deepEqual(completed.completion.values, ['Engineering']);

      // bob: nothing of server-everything, and the shared URI is bare's, plain.
      assert.deepEqual(await prompts(bob), ['bare__twin-hello']);
      const bobResources = await resources(bob);
      assert.ok(!bobResources.some((uri) => uri.startsWith('demo://resource/dynamic') || uri.includes('anygpt://')), bobResources.join(', '));
      assert.ok(bobResources.includes(SHARED_URI), bobResources.join(', '));
      assert.deepEqual(await templates(bob), ['twin://note/{id}']);
      const shared = await bob.readResource({ uri: SHARED_URI });
      assert.equal(shared.contents[0].text, 'written by the twin server');

      // Each refusal is the one a name or URI no server has gets, word for word.
      const refusal = async (attempt, hidden, missing) => {
        const error = async (value) => {
          const failed = await attempt(value).then(() => null, (e) => e);
          assert.ok(failed, `${value} was answered`);
          return { code: failed.code, message: failed.message.replaceAll(value, '<asked>') };
        };
        const [seen, absent] = [await error(hidden), await error(missing)];
        assert.deepEqual(seen, absent, `${hidden} vs ${missing}`);
        assert.doesNotMatch(seen.message, /forbidden|not allowed|permission|hidden/i);
      };
      await refusal((name) => bob.getPrompt({ name }), 'everything__simple-prompt', 'nowhere__simple-prompt');
      const dynamic = 'demo://resource/dynamic/text/3';
      await refusal((uri) => bob.readResource({ uri }), dynamic, 'nowhere://resource/3');
      await refusal((uri) => bob.readResource({ uri }), `anygpt://everything/${dynamic}`, `anygpt://nowhere/${dynamic}`);
      await refusal((uri) => bob.subscribeResource({ uri }), dynamic, 'nowhere://resource/3');
      await refusal(
        (name) => bob.complete({ ref: { type: 'ref/prompt', name }, argument: { name: 'department', value: 'Eng' } }),
        'everything__completable-prompt',
        'nowhere__completable-prompt',
      );
      await refusal(
        (uri) => bob.complete({ ref: { type: 'ref/resource', uri }, argument: { name: 'resourceId', value: '1' } }),
        'demo://resource/dynamic/text/{resourceId}',
        'nowhere://resource/{resourceId}',
      );

      // A server with no tools is judged by the rules for it as a whole (`pattern: "*"`).
      assert.ok(!(await prompts(carol)).includes('bare__twin-hello'), (await prompts(carol)).join(', '));
      assert.ok((await prompts(carol)).includes('everything__simple-prompt'));
      await refusal((uri) => carol.readResource({ uri }), 'twin://note/1', 'nowhere://note/1');
    } finally {
      await Promise.all([alice, bob, carol].map((client) => client.close()));
    }
  });

  test('subscriptions/listen: updates and list changes of a hidden server never reach the caller', async () => {
    const tokenOf = (sub) => accessToken(key, audience, { sub, groups: ['devs'] });
    const alice = await clientWith(gateway.url, tokenOf('alice'));
    try {
      const uri = (await alice.listResources()).resources.map((r) => r.uri).find((u) => u.startsWith('demo://') && u !== SHARED_URI);
      assert.ok(uri);
      const asked = { promptsListChanged: true, resourcesListChanged: true, resourceSubscriptions: [uri] };
      const [seen, unseen] = [await listen(gateway.url, tokenOf('alice'), asked), await listen(gateway.url, tokenOf('bob'), asked)];
      const acknowledged = (stream) => stream.messages.some((m) => m.method === 'notifications/subscriptions/acknowledged');
      await waitFor(() => acknowledged(seen) && acknowledged(unseen), 5000);
      // server-everything sends updates of what is subscribed (every 5 s) once toggled on.
      await alice.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool: 'toggle-subscriber-updates', arguments: {} } });
      const updated = (stream) => stream.messages.some((m) => m.method === 'notifications/resources/updated');
      assert.ok(await waitFor(() => updated(seen), 12_000), JSON.stringify(seen.messages));
      await new Promise((r) => setTimeout(r, 300));
      await Promise.all([seen.close(), unseen.close()]);
      assert.ok(acknowledged(unseen), JSON.stringify(unseen.messages));
      assert.deepEqual(unseen.messages.filter((m) => m.method !== 'notifications/subscriptions/acknowledged'), []);
      assert.equal(seen.messages.find((m) => m.method === 'notifications/resources/updated').params.uri, uri);
    } finally {
      await alice.close();
    }
  });
});
