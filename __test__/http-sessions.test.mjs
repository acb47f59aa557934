// `discovery.http.legacySessions` (#26 item 7): a 2025-11-25 client over `serve --http` gets a
// session in this process, so a downstream server's elicitation reaches it during a call and
// its answer (a POST of its own) comes back to the call. Each session is its opener's: another
// user naming it gets 404 as for an unknown session. 2026-07-28 requests stay sessionless.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { answerOf, raw2026, referenceServer, root, serveHttp, signedJwt, signingKey, tempDir, waitFor } from './helpers.mjs';

const ISSUER = 'https://id.sessions.test';
const SCOPE = 'mcp:tools';
const asking = { name: 'asking', connection: { command: process.execPath, args: [join(root, '__test__/fixtures/asking-server.mjs')] } };

describe('legacy sessions: forwarded requests for older clients, within one process', () => {
  const key = signingKey('sessions-key');
  let gateway;
  let tokenOf;

  before(async () => {
    const jwks = join(tempDir('anygpt-sessions-'), 'jwks.json');
    writeFileSync(jwks, JSON.stringify({ keys: [key.jwk] }));
    gateway = await serveHttp([asking, referenceServer('everything')], {
      discovery: { http: { legacySessions: true, auth: { issuers: [{ issuer: ISSUER, jwksFile: jwks, requiredScopes: [SCOPE] }] } } },
    });
    const now = Math.floor(Date.now() / 1000);
    tokenOf = (sub) => signedJwt(key, { iss: ISSUER, aud: gateway.url, iat: now, exp: now + 600, scope: SCOPE, sub });
  });
  after(async () => {
    gateway.child.kill('SIGTERM');
    await gateway.exit;
  });

  test("a server's elicitation reaches a 2025-11-25 client in its session; another user cannot use that session", async () => {
    const alice = new Client({ name: 'sessions-test', version: '0.0.0' }, { capabilities: { elicitation: {} } });
    const asked = [];
    alice.setRequestHandler(ElicitRequestSchema, (request) => {
      asked.push(request.params.message);
      return { action: 'accept', content: { answer: 'yes' } };
    });
    const transport = new StreamableHTTPClientTransport(new URL(gateway.url), {
      requestInit: { headers: { Authorization: `Bearer ${tokenOf('alice')}` } },
    });
    await alice.connect(transport);
    try {
      assert.ok(transport.sessionId, 'initialize minted a session');
      const result = await alice.callTool({ name: 'execute_tool', arguments: { server: 'asking', tool: 'ask_person', arguments: { message: 'Ship it?' } } });
      const body = JSON.parse(result.content[0].text);
      assert.deepEqual(body.answer, { action: 'accept', content: { answer: 'yes' } }, result.content[0].text);
      assert.deepEqual(asked, ['[server asking asks] Ship it?']);

      // Bob names alice's session: unknown to him.
      const hijack = await fetch(gateway.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-11-25',
          'mcp-session-id': transport.sessionId,
          authorization: `Bearer ${tokenOf('bob')}`,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
      });
      assert.equal(hijack.status, 404, await hijack.text());
      // Alice's session still works.
      assert.equal((await alice.listTools()).tools.length, 5);
    } finally {
      await alice.close();
    }
  });

  test("a session gets the updates of the resources it subscribed to on its own stream", async () => {
    const client = new Client({ name: 'sessions-test', version: '0.0.0' });
    const updates = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => updates.push(notification.params.uri));
    await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url), {
      requestInit: { headers: { Authorization: `Bearer ${tokenOf('dana')}` } },
    }));
    try {
      const { resources } = await client.listResources();
      const uri = resources.find((r) => r.uri.startsWith('demo://resource/static/'))?.uri ?? resources[0].uri;
      await client.subscribeResource({ uri });
      // server-everything sends updates of what is subscribed (every 5 s) once toggled on.
      await client.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool: 'toggle-subscriber-updates', arguments: {} } });
      assert.ok(await waitFor(() => updates.includes(uri), 15_000), `updates: ${JSON.stringify(updates)}`);
    } finally {
      await client.close();
    }
  });

  test('2026-07-28 requests stay sessionless beside sessions', async () => {
    const response = await raw2026(gateway.url, 'tools/call', { name: 'list_mcp_servers', arguments: {} }, { authorization: `Bearer ${tokenOf('carol')}` });
    assert.equal(response.headers.get('mcp-session-id'), null);
    const answer = await answerOf(response);
    assert.ok(JSON.parse(answer.result.content[0].text).servers, JSON.stringify(answer));
  });
});
