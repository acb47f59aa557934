// The team face: `serve --http` with the official SDK client over streamable HTTP, a raw
// 2026-07-28 client, the Host/Origin/size guards, /healthz, /readyz, /metrics (parsed by a
// Prometheus text parser), the drain on SIGTERM, the bind policy and the Node API.
// (`http.test.mjs` is about downstream servers reached over HTTP.)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { alive, answerOf, bin, descendants, exited, isolatedEnv, raw2026, referenceServer, root, serveHttp, waitFor, writeConfig } from './helpers.mjs';

const faultServer = join(root, '__test__/fixtures/fault-server.mjs');
const fault = (name, ...flags) => ({ name, connection: { command: process.execPath, args: [faultServer, ...flags] } });

/** The official client over streamable HTTP (it negotiates 2025-11-25 with `initialize`). */
async function sdkClient(url) {
  const client = new Client({ name: 'serve-http-tests', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

async function metaCall(client, name, args = {}, options = undefined) {
  const result = await client.callTool({ name, arguments: args }, undefined, options);
  return { result, body: JSON.parse(result.content[0].text) };
}

async function stop(gateway) {
  gateway.child.kill('SIGTERM');
  return gateway.exit;
}

test('the official SDK client over HTTP: search → details → execute, progress, no session', async () => {
  const gateway = await serveHttp([referenceServer('everything'), referenceServer('memory')]);
  try {
    const client = await sdkClient(gateway.url);
    assert.equal(client.transport.sessionId, undefined, 'sessionless: no Mcp-Session-Id');
    const tools = await client.listTools();
    assert.deepEqual(tools.tools.map((t) => t.name).sort(), [
      'execute_tool', 'get_tool_details', 'list_mcp_servers', 'list_tools', 'search_tools',
    ]);
    const found = await metaCall(client, 'search_tools', { query: 'create entities in the knowledge graph' });
    assert.ok(found.body.results.some((r) => r.server === 'memory' && r.tool === 'create_entities'), JSON.stringify(found.body));
    const details = await metaCall(client, 'get_tool_details', { server: 'everything', tool: 'echo' });
    assert.ok(details.body.inputSchema.properties.message, JSON.stringify(details.body));
    const echoed = await client.callTool({
      name: 'execute_tool',
      arguments: { server: 'everything', tool: 'echo', arguments: { message: 'over http' } },
    });
    assert.ok(!echoed.isError, JSON.stringify(echoed));
    assert.match(echoed.content[0].text, /over http/);

    const progress = [];
    const long = await client.callTool(
      {
        name: 'execute_tool',
        arguments: { server: 'everything', tool: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } },
      },
      undefined,
      { onprogress: (p) => progress.push(p) },
    );
    assert.ok(!long.isError, JSON.stringify(long));
    assert.ok(progress.length >= 2, `progress over the request's SSE stream: ${JSON.stringify(progress)}`);
    await client.close();
  } finally {
    assert.equal(await stop(gateway), 0, gateway.stderr());
  }
});

/** What the fault server recorded, once `count` cancellations are there (or 4 s passed). */
async function cancellations(client, count) {
  let events = [];
  for (let i = 0; i < 40; i++) {
    const { result } = await metaCall(client, 'execute_tool', { server: 'fault', tool: 'events' });
    events = JSON.parse(result.content[0].text);
    if (events.filter((e) => e === 'hang:cancelled').length >= count) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return events.filter((e) => e === 'hang:cancelled').length;
}

test('cancellation reaches the downstream server: the SDK cancelling, and a client closing its stream', async () => {
  const gateway = await serveHttp([fault('fault')]);
  try {
    const client = await sdkClient(gateway.url);
    assert.equal(await cancellations(client, 0), 0, 'the server is up before the call starts');
    // The SDK keeps the stream open and sends notifications/cancelled in a POST of its own.
    const controller = new AbortController();
    const hung = client.callTool(
      { name: 'execute_tool', arguments: { server: 'fault', tool: 'hang' } },
      undefined,
      { signal: controller.signal, timeout: 60_000 },
    );
    await new Promise((r) => setTimeout(r, 500));
    controller.abort();
    await assert.rejects(hung);
    assert.equal(await cancellations(client, 1), 1, 'notifications/cancelled cancelled the downstream call');

    // A client that just goes away: the closed response stream cancels the call.
    const closing = new AbortController();
    const response = await fetch(gateway.url, {
      method: 'POST',
      signal: closing.signal,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_tool', arguments: { server: 'fault', tool: 'hang' } } }),
    });
    assert.equal(response.status, 200);
    await new Promise((r) => setTimeout(r, 300));
    closing.abort();
    assert.equal(await cancellations(client, 2), 2, 'the closed stream cancelled the downstream call');
    await client.close();
  } finally {
    await stop(gateway);
  }
});

test('a raw 2026-07-28 client works without initialize; server/discover answers', async () => {
  const gateway = await serveHttp([referenceServer('everything')]);
  try {
    const discover = await raw2026(gateway.url, 'server/discover');
    assert.equal(discover.status, 200);
    const discovered = await answerOf(discover);
    assert.ok(discovered.result.supportedVersions.includes('2026-07-28'), JSON.stringify(discovered));
    const response = await raw2026(gateway.url, 'tools/call', { name: 'search_tools', arguments: { query: 'echo a message' } });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('mcp-session-id'), null);
    const answer = await answerOf(response);
    const body = JSON.parse(answer.result.content[0].text);
    assert.ok(body.results.some((r) => r.server === 'everything' && r.tool === 'echo'), JSON.stringify(body));
    // A header contradicting the body is refused (SEP-2243).
    const mismatched = await raw2026(gateway.url, 'tools/list', {}, { 'Mcp-Method': 'tools/call' });
    assert.equal(mismatched.status, 400);
  } finally {
    await stop(gateway);
  }
});

/** Read a `subscriptions/listen` stream's messages as they come: `next(pred)` waits for one. */
function streamOf(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const seen = [];
  let buffer = '';
  let pending; // one read at a time: a read given up on would take its chunk with it
  return {
    seen,
    async next(pred, ms = 15_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const found = seen.find(pred);
        if (found) return found;
        if (Date.now() > deadline) return undefined;
        pending ??= reader.read();
        const chunk = await Promise.race([pending, new Promise((r) => setTimeout(() => r({ timeout: true }), 500))]);
        if (chunk.timeout) continue;
        pending = undefined;
        if (chunk.done) return seen.find(pred);
        buffer += decoder.decode(chunk.value, { stream: true });
        const lines = buffer.split('\n');
        buffer = lines.pop();
        for (const line of lines) if (line.startsWith('data:') && line.slice(5).trim()) seen.push(JSON.parse(line.slice(5)));
      }
    },
  };
}

test('2026-07-28: resources/read says resultType; subscriptions/listen relays resource updates under the URIs asked', async () => {
  const twin = { name: 'twin', connection: { command: process.execPath, args: [join(root, '__test__/fixtures/twin-resource-server.mjs')] } };
  const gateway = await serveHttp([referenceServer('everything'), twin]);
  try {
    const listed = await answerOf(await raw2026(gateway.url, 'resources/list'));
    const uris = listed.result.resources.map((r) => r.uri);
    const uri = uris.find((u) => u.startsWith('demo://resource/static/document/'));
    const renamed = 'anygpt://twin/demo://resource/static/document/architecture.md';
    assert.ok(uri && uris.includes(renamed), JSON.stringify(uris));
    const read = await answerOf(await raw2026(gateway.url, 'resources/read', { uri }));
    assert.equal(read.result?.resultType, 'complete', JSON.stringify(read).slice(0, 300));

    const controller = new AbortController();
    const notifications = { promptsListChanged: true, resourceSubscriptions: [uri, renamed] };
    const listen = await raw2026(gateway.url, 'subscriptions/listen', { notifications }, {}, controller.signal);
    assert.equal(listen.status, 200);
    const stream = streamOf(listen);
    const ack = await stream.next((m) => m.method === 'notifications/subscriptions/acknowledged');
    assert.ok(ack, JSON.stringify(stream.seen));
    const updated = (asked) => (m) => m.method === 'notifications/resources/updated' && m.params?.uri === asked;
    // The twin answers a subscription at once, with the URI it knows: the client gets the one it asked.
    assert.ok(await stream.next(updated(renamed)), JSON.stringify(stream.seen));
    // server-everything sends updates of what is subscribed once its toggle tool is called.
    const toggle = await raw2026(gateway.url, 'tools/call', {
      name: 'execute_tool',
      arguments: { server: 'everything', tool: 'toggle-subscriber-updates', arguments: {} },
    });
    assert.equal(toggle.status, 200);
    const update = await stream.next(updated(uri));
    assert.ok(update, JSON.stringify(stream.seen));
    assert.equal(update.params._meta?.['io.modelcontextprotocol/subscriptionId'], 1, JSON.stringify(update));
    // Three prompts added downstream: one prompts/list_changed on the stream.
    await raw2026(gateway.url, 'tools/call', { name: 'execute_tool', arguments: { server: 'twin', tool: 'twin_add_prompts', arguments: {} } });
    assert.ok(await stream.next((m) => m.method === 'notifications/prompts/list_changed'), JSON.stringify(stream.seen));
    await new Promise((r) => setTimeout(r, 600));
    await stream.next(() => false, 600);
    assert.equal(stream.seen.filter((m) => m.method === 'notifications/prompts/list_changed').length, 1);

    // The twin crashes and is restarted: its new session is subscribed again, and answers.
    const renamedUpdates = () => stream.seen.filter(updated(renamed)).length;
    assert.equal(renamedUpdates(), 1);
    await raw2026(gateway.url, 'tools/call', { name: 'execute_tool', arguments: { server: 'twin', tool: 'twin_exit', arguments: {} } });
    assert.ok(await stream.next(() => renamedUpdates() >= 2, 20_000), JSON.stringify(stream.seen));

    // A second client on the same resource keeps its updates when the first one leaves: the
    // downstream subscription ends only with its last listener.
    const other = new AbortController();
    const second = streamOf(await raw2026(gateway.url, 'subscriptions/listen', { notifications: { resourceSubscriptions: [uri] } }, {}, other.signal));
    // Its first update says its subscription is in place (server-everything sends every 5 s).
    assert.ok(await second.next(updated(uri), 12_000), JSON.stringify(second.seen));
    controller.abort();
    await new Promise((r) => setTimeout(r, 300));
    const before = second.seen.length;
    assert.ok(await second.next((m, at) => at >= before && updated(uri)(m), 12_000), JSON.stringify(second.seen));
    other.abort();
  } finally {
    await stop(gateway);
  }
});

test("a server's elicitation over HTTP is refused to it with the reason, and the call goes on", async () => {
  const asking = { name: 'asking', connection: { command: process.execPath, args: [join(root, '__test__/fixtures/asking-server.mjs')] } };
  const gateway = await serveHttp([asking]);
  try {
    const client = new Client({ name: 'serve-http-tests', version: '0.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler((await import('@modelcontextprotocol/sdk/types.js')).ElicitRequestSchema, () => ({ action: 'accept', content: { answer: 'yes' } }));
    await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url)));
    const result = await client.callTool({ name: 'execute_tool', arguments: { server: 'asking', tool: 'ask_person', arguments: { message: 'ok?' } } });
    const text = result.content[0].text;
    assert.match(text, /served over HTTP without a session/, text);
    assert.match(text, /the gateway over stdio forwards them/, text);
    await client.close();
  } finally {
    await stop(gateway);
  }
});

test('guards: foreign Host and Origin get 403, an oversized body 413, loopback origins pass', async () => {
  const gateway = await serveHttp([]);
  try {
    const ping = (headers = {}, body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' })) =>
      fetch(gateway.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body,
      });
    assert.equal((await ping()).status, 200);
    assert.equal((await ping({ origin: gateway.base })).status, 200, 'same origin as the bound loopback address');
    assert.equal((await ping({ origin: 'https://evil.example' })).status, 403);
    // fetch will not send a Host of our choosing: a raw request does.
    const { request } = await import('node:http');
    const { port } = new URL(gateway.url);
    const rebound = await new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers: { host: `rebound.example:${port}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' } },
        (res) => {
          let text = '';
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode, text }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }));
    });
    assert.equal(rebound.status, 403, 'DNS rebinding: a Host not on the allow-list');
    assert.match(rebound.text, /add it to discovery\.http\.allowedHosts, or set discovery\.http\.publicUrl/, 'the refusal names the fix');
    // A body announced over the limit is refused before it is sent: the answer comes while the
    // client still holds it (a client writing it all would meet a closed connection).
    const oversized = await new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': 17 * 1024 * 1024 } },
        (res) => {
          let text = '';
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode, text }));
        },
      );
      req.on('error', reject);
      req.write('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"');
    });
    assert.equal(oversized.status, 413);
    assert.match(oversized.text, /at most 16777216 bytes/);
    // One without a length is cut once it passes the limit.
    const chunked = await new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'transfer-encoding': 'chunked' } },
        (res) => {
          res.resume();
          resolve(res.statusCode);
        },
      );
      // The server may close before the client finished writing: only the answer counts.
      req.on('error', () => {});
      const piece = 'a'.repeat(1024 * 1024);
      for (let i = 0; i < 17; i++) req.write(piece);
      req.end();
      setTimeout(() => reject(new Error('no answer to an endless body')), 20_000).unref();
    });
    assert.equal(chunked, 413);

    assert.deepEqual(await (await fetch(`${gateway.base}/healthz`)).json(), { status: 'ok' });
    const ready = await fetch(`${gateway.base}/readyz`);
    assert.equal(ready.status, 200, 'an empty config is indexed at once');
    assert.equal((await ready.json()).status, 'ready');
  } finally {
    await stop(gateway);
  }
});

test('/metrics parses as Prometheus text and counts a scripted session', async () => {
  const gateway = await serveHttp([referenceServer('everything')]);
  try {
    const client = await sdkClient(gateway.url);
    for (let i = 0; i < 3; i++) await metaCall(client, 'search_tools', { query: 'echo' });
    await client.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool: 'echo', arguments: { message: 'secret-argument-value' } } });
    await client.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool: 'no_such_tool' } });
    await client.close();
    await fetch(gateway.url, { method: 'POST', headers: { origin: 'https://evil.example' }, body: '{}' });

    const response = await fetch(`${gateway.base}/metrics`);
    assert.match(response.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    assert.doesNotMatch(text, /secret-argument-value/);
    const families = Object.fromEntries(parsePrometheusTextFormat(text).map((f) => [f.name, f]));
    const requests = families.mcp_server_requests_total;
    assert.equal(requests.type, 'COUNTER');
    const count = (labels) =>
      requests.metrics
        .filter((m) => Object.entries(labels).every(([k, v]) => m.labels[k] === v))
        .reduce((sum, m) => sum + Number(m.value), 0);
    assert.equal(count({ mcp_method_name: 'tools/call', gen_ai_tool_name: 'search_tools', outcome: 'ok' }), 3);
    assert.equal(count({ mcp_method_name: 'tools/call', gen_ai_tool_name: 'execute_tool', outcome: 'ok' }), 1);
    assert.equal(count({ mcp_method_name: 'tools/call', gen_ai_tool_name: 'execute_tool', outcome: 'tool_error' }), 1);
    assert.equal(count({ mcp_method_name: 'initialize', outcome: 'ok' }), 1);
    // The foreign Origin, and the SDK's GET for a standalone stream (405: sessionless, none).
    assert.equal(count({ outcome: 'rejected' }), 2);
    assert.equal(families.mcp_server_operation_duration_seconds.type, 'HISTOGRAM');
    assert.equal(families.discovery_search_duration_seconds.type, 'HISTOGRAM');
    // The engine's call statistics (the same counters as `stats` and getStats()).
    const calls = families.discovery_downstream_calls_total;
    assert.equal(calls.type, 'COUNTER');
    const callsOf = (labels) => calls.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels[k] === v)).reduce((sum, m) => sum + Number(m.value), 0);
    assert.equal(callsOf({ server: 'everything', tool: 'echo', outcome: 'ok' }), 1);
    // A name that is no tool is counted as `(unknown)`: a client chose it.
    assert.equal(callsOf({ server: 'everything', tool: '(unknown)', outcome: 'TOOL_NOT_FOUND' }), 1);
    assert.equal(callsOf({}), 2);
    const seconds = families.discovery_downstream_call_duration_seconds_total.metrics.find((m) => m.labels.tool === 'echo');
    assert.ok(Number(seconds.value) > 0, JSON.stringify(seconds));
    // A second scrape adds nothing new.
    const again = Object.fromEntries(parsePrometheusTextFormat(await (await fetch(`${gateway.base}/metrics`)).text()).map((f) => [f.name, f]));
    assert.equal(again.discovery_downstream_calls_total.metrics.reduce((sum, m) => sum + Number(m.value), 0), 2);
    const status = families.discovery_server_status.metrics;
    assert.deepEqual(status.map((m) => m.labels), [{ server: 'everything', state: 'connected' }]);
    for (const family of Object.values(families)) {
      for (const metric of family.metrics) {
        for (const value of Object.values(metric.labels ?? {})) assert.ok(value.length < 64, `bounded label ${value}`);
      }
    }
  } finally {
    await stop(gateway);
  }
});

test('SIGTERM drains: a call in flight finishes, then the downstream servers close', async () => {
  const gateway = await serveHttp([fault('fault', '--slow-tool')]);
  const client = await sdkClient(gateway.url);
  const pids = await waitFor(() => descendants(gateway.child.pid).filter(alive), 5000);
  const slow = client.callTool({ name: 'execute_tool', arguments: { server: 'fault', tool: 'slow', arguments: { ms: 1500 } } });
  await new Promise((r) => setTimeout(r, 300));
  gateway.child.kill('SIGTERM');
  const result = await slow;
  assert.ok(!result.isError, JSON.stringify(result));
  assert.match(result.content[0].text, /slow done after 1500 ms/);
  assert.equal(await gateway.exit, 0, gateway.stderr());
  assert.match(gateway.stderr(), /draining/);
  assert.equal(gateway.stdout(), '', 'nothing on stdout');
  assert.ok(await waitFor(() => pids.every((pid) => !alive(pid)), 5000), 'downstream processes ended');
});

test('SIGTERM: a call still running past drainTimeoutMs is cut and the gateway exits', async () => {
  const gateway = await serveHttp([fault('fault', '--slow-tool')], { discovery: { http: { drainTimeoutMs: 300 } } });
  const client = await sdkClient(gateway.url);
  const slow = client.callTool({ name: 'execute_tool', arguments: { server: 'fault', tool: 'slow', arguments: { ms: 30_000 } } }).then(
    () => 'answered',
    (e) => e.message,
  );
  await new Promise((r) => setTimeout(r, 300));
  const started = Date.now();
  gateway.child.kill('SIGTERM');
  assert.equal(await gateway.exit, 0, gateway.stderr());
  assert.ok(Date.now() - started < 10_000, 'exits within the deadline, not after the call');
  assert.match(await slow, /shutting down .*drainTimeoutMs/);
  assert.ok(Date.now() - started < 10_000, 'the client learns at once, not at its own timeout');
});

test('a non-loopback address without auth is refused with how to configure auth', async () => {
  const config = writeConfig({ discovery: { servers: [] } });
  const child = spawn(process.execPath, [bin, 'serve', '--http', '0.0.0.0:0', '--config', config], {
    env: isolatedEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  assert.equal(await exited(child), 2);
  assert.match(stderr, /refusing to serve on 0\.0\.0\.0:0/);
  assert.match(stderr, /discovery\.http\.auth/);
});

test('the Node API serves an engine over HTTP until close()', async () => {
  const { DiscoveryEngine } = await import('../index.js');
  const engine = new DiscoveryEngine({ discovery: { servers: [referenceServer('everything')] } });
  const server = await engine.serveHttp('127.0.0.1:0');
  try {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const client = await sdkClient(server.url);
    const found = await metaCall(client, 'search_tools', { query: 'echo' });
    assert.ok(found.body.results.some((r) => r.tool === 'echo'), JSON.stringify(found.body));
    await client.close();
    await assert.rejects(engine.serveHttp('0.0.0.0:0'), (e) => e.code === 'CONFIGURATION_ERROR' && /refusing to serve/.test(e.message));
  } finally {
    await server.close();
    await server.close();
    await engine.close();
  }
  await assert.rejects(fetch(server.url, { method: 'POST' }));
});
