// Remote downstream servers: server-everything in its streamable-HTTP and legacy HTTP+SSE
// modes on 127.0.0.1, reached through the same five meta-tools.
import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import { test } from 'node:test';
import { call, exited, freePort, startGateway, startHttpEverything, waitFor, writeConfig } from './helpers.mjs';

test('a streamable-HTTP server works through the five meta-tools', async () => {
  const http = await startHttpEverything();
  const config = writeConfig({
    discovery: {
      servers: [{
        name: 'remote',
        connection: { type: 'http', url: '${REMOTE_URL}', headers: { Authorization: 'Bearer ${REMOTE_TOKEN}', 'X-Client': 'anygpt-test' } },
      }],
    },
  });
  const gateway = await startGateway(config, { REMOTE_URL: http.url, REMOTE_TOKEN: 'test-token' });
  try {
    await assertEchoWorks(gateway.client, 'over http');
    const { body: servers } = await call(gateway.client, 'list_mcp_servers');
    assert.ok(servers.servers[0].toolCount > 5);
  } finally {
    await gateway.client.close();
    http.child.kill();
  }
});

/** Search for and run server-everything's echo on the server named `remote`. */
async function assertEchoWorks(client, message) {
  const { body: servers } = await call(client, 'list_mcp_servers');
  assert.equal(servers.servers[0].status, 'connected', JSON.stringify(servers));
  const { body: found } = await call(client, 'search_tools', { query: 'echo' });
  assert.deepEqual([found.results[0].server, found.results[0].tool], ['remote', 'echo']);
  const result = await client.callTool({
    name: 'execute_tool', arguments: { server: 'remote', tool: 'echo', arguments: { message } },
  });
  assert.equal(result.content[0].text, `Echo: ${message}`);
}

for (const type of ['http', 'sse']) {
  test(`a legacy HTTP+SSE server works with connection type '${type}'`, async () => {
    const sse = await startHttpEverything('sse');
    const config = writeConfig({
      discovery: { servers: [{ name: 'remote', connection: { type, url: sse.url, headers: { 'X-Client': 'anygpt-test' } } }] },
    });
    const gateway = await startGateway(config);
    try {
      await assertEchoWorks(gateway.client, `over ${type} to sse`);
      // Concurrent calls share the one stream; each answer must reach its own caller.
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => gateway.client.callTool({
        name: 'execute_tool', arguments: { server: 'remote', tool: 'echo', arguments: { message: `n${i}` } },
      })));
      assert.deepEqual(answers.map((a) => a.content[0].text), Array.from({ length: 20 }, (_, i) => `Echo: n${i}`));
    } finally {
      await gateway.client.close();
      sse.child.kill();
    }
  });
}

test("connection type 'sse' against a streamable-only server fails with the reason", async () => {
  const http = await startHttpEverything();
  const config = writeConfig({
    discovery: { servers: [{ name: 'remote', startupTimeoutMs: 3000, connection: { type: 'sse', url: http.url } }] },
  });
  const gateway = await startGateway(config);
  try {
    const { body } = await call(gateway.client, 'list_mcp_servers');
    assert.equal(body.servers[0].status, 'error');
    assert.match(body.servers[0].error, /GET http:\/\/127\.0\.0\.1:\d+\/mcp/, body.servers[0].error);
  } finally {
    await gateway.client.close();
    http.child.kill();
  }
});

test('an unreachable HTTP server is `error` with the reason', async () => {
  const port = await freePort();
  const config = writeConfig({
    discovery: { servers: [{ name: 'down', startupTimeoutMs: 3000, connection: { type: 'http', url: `http://127.0.0.1:${port}/mcp?api_key=s3cret` } }] },
  });
  const gateway = await startGateway(config);
  try {
    const { body } = await call(gateway.client, 'list_mcp_servers');
    assert.equal(body.servers[0].status, 'error');
    // Both transports were tried, and each says why it failed.
    assert.match(body.servers[0].error, /streamable HTTP: .+; legacy HTTP\+SSE: .+/, body.servers[0].error);
    // The status reaches the model: a key in the URL must not.
    assert.ok(!body.servers[0].error.includes('s3cret'), body.servers[0].error);
    assert.match(body.servers[0].error, /api_key=\*\*\*/);
  } finally {
    await gateway.client.close();
  }
});

test('a remote server not up yet at startup is retried in the background and comes up', async () => {
  const port = await freePort();
  const config = writeConfig({
    discovery: { servers: [{ name: 'remote', startupTimeoutMs: 3000, connection: { type: 'http', url: `http://127.0.0.1:${port}/mcp` } }] },
  });
  const gateway = await startGateway(config);
  let http;
  try {
    const { body } = await call(gateway.client, 'list_mcp_servers');
    assert.equal(body.servers[0].status, 'error');
    assert.match(body.servers[0].error, /next attempt in \d+ s/);
    http = await startHttpEverything('streamableHttp', port);
    // Nobody calls it: the supervisor's own retry (backoff 1 s, 2 s, …) finds it up.
    const up = await (async () => {
      for (let i = 0; i < 80; i++) {
        const { body: now } = await call(gateway.client, 'list_mcp_servers');
        if (now.servers[0].status === 'connected') return true;
        await new Promise((r) => setTimeout(r, 100));
      }
      return false;
    })();
    assert.ok(up, 'the remote server never came up');
    await assertEchoWorks(gateway.client, 'late but up');
  } finally {
    await gateway.client.close();
    http?.child.kill();
  }
});

for (const mode of ['streamableHttp', 'sse']) {
  test(`a ${mode} server that goes away and comes back: a clear error meanwhile, then calls work again`, async () => {
    let remote = await startHttpEverything(mode);
    const url = `${remote.url}?api_key=s3cret`;
    const config = writeConfig({
      discovery: { servers: [{ name: 'remote', timeoutMs: 5000, connection: { type: mode === 'sse' ? 'sse' : 'http', url } }] },
    });
    const gateway = await startGateway(config);
    const echo = (message) => gateway.client.callTool({
      name: 'execute_tool', arguments: { server: 'remote', tool: 'echo', arguments: { message } },
    });
    try {
      await assertEchoWorks(gateway.client, 'before it goes away');
      remote.child.kill();
      await exited(remote.child);

      const failed = await echo('while it is away');
      const text = failed.content[0].text;
      assert.equal(failed.isError, true, text);
      // The error reaches the model: a key in the URL must not…
      assert.ok(!text.includes('s3cret'), text);
      // …and it says what happened: the call found the server gone (or, over SSE, the
      // gateway saw the stream end first).
      assert.match(text, /connection refused|actively refused|closed the connection/i);
      const { body } = await call(gateway.client, 'list_mcp_servers');
      assert.ok(!JSON.stringify(body).includes('s3cret'), JSON.stringify(body));

      // Back on the same port, it has forgotten our session. TypeScript-SDK servers answer
      // that with 400 and an id-less error, which once left every call waiting for its
      // whole timeout (5 s here: a hang shows as TOOL_EXECUTION_TIMEOUT below). Over
      // streamable HTTP the first call must work (the session is renewed inside it); over
      // SSE the gateway reconnects with backoff, and until then calls say it is not connected.
      remote = await startHttpEverything(mode, remote.port);
      let answer;
      for (let attempt = 0; attempt < 20; attempt++) {
        answer = await echo('after it came back');
        if (!answer.isError) break;
        assert.match(answer.content[0].text, /SERVER_CONNECTION_ERROR/, answer.content[0].text);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      assert.equal(answer.content[0].text, 'Echo: after it came back');
      // A renewed session may be a redeployed server: its tools are listed again.
      if (mode === 'streamableHttp') assert.match(gateway.stderr(), /listing tools again/);
    } finally {
      await gateway.client.close();
      remote.child.kill();
    }
  });
}

test('a streamable-HTTP server that restarts gets a new session without waiting for a call', async () => {
  let remote = await startHttpEverything();
  const config = writeConfig({ discovery: { servers: [{ name: 'remote', connection: { type: 'http', url: remote.url } }] } });
  const gateway = await startGateway(config);
  try {
    await assertEchoWorks(gateway.client, 'before the restart');
    remote.child.kill();
    await exited(remote.child);
    remote = await startHttpEverything('streamableHttp', remote.port);
    // No call: the refused event stream alone must renew the session (else the server's
    // notifications, tools/list_changed among them, are lost until the model calls it).
    await waitFor(() => /listing tools again/.test(gateway.stderr()), 20_000);
    assert.match(gateway.stderr(), /refused our session's event stream/);
    assert.match(gateway.stderr(), /listing tools again/);
    await assertEchoWorks(gateway.client, 'after the restart');
  } finally {
    await gateway.client.close();
    remote.child.kill();
  }
});

/**
 * A minimal streamable-HTTP MCP server for faults server-everything cannot show: one `echo`
 * tool, answered by `onCall(message)` → [status, body]. Counts what it was sent.
 */
async function startTinyHttpServer(onCall) {
  const seen = { initialize: 0, call: 0 };
  // Set `forgets` to lose every session right after its handshake, as a server on serverless
  // hosting or behind a load balancer without session affinity does.
  const state = { forgets: false };
  const server = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      const json = (status, value, headers = {}) =>
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));
      if (req.method !== 'POST') return res.writeHead(405).end();
      const message = JSON.parse(body);
      if (message.method === 'initialize') {
        seen.initialize++;
        const result = { protocolVersion: message.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'tiny', version: '1' } };
        return json(200, { jsonrpc: '2.0', id: message.id, result }, { 'mcp-session-id': `session-${seen.initialize}` });
      }
      if (!('id' in message)) return res.writeHead(202).end();
      if (state.forgets) return json(400, { jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' } });
      if (message.method === 'tools/list') {
        return json(200, { jsonrpc: '2.0', id: message.id, result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] } });
      }
      if (message.method === 'tools/call') {
        seen.call++;
        return json(...onCall(message));
      }
      return json(200, { jsonrpc: '2.0', id: message.id, result: {} });
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, seen, state, url: `http://127.0.0.1:${server.address().port}/mcp` };
}

test("a healthy server's error without an id reaches the caller at once, and nothing is re-sent", async () => {
  const tiny = await startTinyHttpServer(() => [400, { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: entity too large' } }]);
  const config = writeConfig({ discovery: { servers: [{ name: 'remote', timeoutMs: 20000, connection: { type: 'http', url: tiny.url } }] } });
  const gateway = await startGateway(config);
  try {
    const result = await gateway.client.callTool({
      name: 'execute_tool', arguments: { server: 'remote', tool: 'echo', arguments: {} },
    });
    assert.equal(result.isError, true);
    // The server's own words, not a timeout after 20 s and not "session expired".
    assert.match(result.content[0].text, /Parse error: entity too large/, result.content[0].text);
    // Not mistaken for a lost session: no second handshake, the call sent once (a tool
    // that did run must not run twice).
    assert.deepEqual(tiny.seen, { initialize: 1, call: 1 });
  } finally {
    await gateway.client.close();
    tiny.server.close();
  }
});

test('a server that quotes the API key in its refusal: the key still never reaches the model', async () => {
  const server = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(403, { 'content-type': 'text/plain' }).end(`invalid key for ${req.url} (${req.headers['x-api-key']})`));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/mcp?api_key=s3cret`;
  const connection = { type: 'http', url, headers: { 'X-Api-Key': 'hdr-s3cret-value' } };
  const config = writeConfig({ discovery: { servers: [{ name: 'remote', startupTimeoutMs: 3000, connection }] } });
  const gateway = await startGateway(config);
  try {
    const { body } = await call(gateway.client, 'list_mcp_servers');
    assert.equal(body.servers[0].status, 'error');
    assert.match(body.servers[0].error, /403/, body.servers[0].error);
    // Neither the URL's key nor the header's (both quoted back by the server).
    assert.ok(!body.servers[0].error.includes('s3cret'), body.servers[0].error);
    // The log line of that failure is written by now, and carries no key either.
    await waitFor(() => /cannot connect/.test(gateway.stderr()), 5000);
    assert.match(gateway.stderr(), /cannot connect/);
    assert.ok(!gateway.stderr().includes('s3cret'), gateway.stderr());
  } finally {
    await gateway.client.close();
    server.close();
  }
});

test('a server that loses every session: calls fail with the reason, and the gateway does not loop', async () => {
  const tiny = await startTinyHttpServer((message) => [200, { jsonrpc: '2.0', id: message.id, result: { content: [{ type: 'text', text: 'ok' }] } }]);
  const config = writeConfig({ discovery: { servers: [{ name: 'remote', timeoutMs: 5000, connection: { type: 'http', url: tiny.url } }] } });
  const gateway = await startGateway(config);
  const echo = () => gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'remote', tool: 'echo', arguments: {} } });
  try {
    assert.equal((await echo()).content[0].text, 'ok');
    tiny.state.forgets = true;
    const failed = await echo();
    assert.equal(failed.isError, true);
    assert.match(failed.content[0].text, /no longer knows our session/, failed.content[0].text);
    // Renewals may ask for the tools again, but at a bounded rate: idle, the handshakes stop.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const settled = tiny.seen.initialize;
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.equal(tiny.seen.initialize, settled, `handshakes went on while idle: ${settled} → ${tiny.seen.initialize}`);
    assert.ok(settled <= 5, `${settled} handshakes`);
  } finally {
    await gateway.client.close();
    tiny.server.close();
  }
});
