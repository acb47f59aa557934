// Traces (`discovery.telemetry`): the official SDK client calls execute_tool through
// `serve --http` (and over stdio) with a W3C trace context; a collector of our own (a Node
// HTTP server that records what is POSTed to /v1/traces) receives the spans; a downstream
// fixture server answers with the `_meta` it was sent.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { freePort, root, serveHttp, startGateway, waitFor, writeConfig } from './helpers.mjs';

const faultServer = join(root, '__test__/fixtures/fault-server.mjs');
const traced = { name: 'fault', connection: { command: process.execPath, args: [faultServer, '--meta-tool'] } };

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';
const PARENT = `00-${TRACE_ID}-${CLIENT_SPAN}-01`;
/** An argument value that must never reach the collector. */
const ARGUMENT = 'argument-value-7f3c9e1d';
const COLLECTOR_KEY = 'collector-key-5b2e8a41d9c7f036';

/**
 * A collector: records each OTLP/JSON export (body parsed, headers) and answers 200 — or,
 * with `hang`, never answers. Returns { url, exports, spans(), close() }.
 */
async function startCollector({ hang = false } = {}) {
  const exports = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      exports.push({ path: request.url, headers: request.headers, text: body, json: JSON.parse(body) });
      if (hang) return;
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end('{}');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const spans = () => exports.flatMap((e) => e.json.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    exports,
    spans,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

function attribute(span, key) {
  const found = span.attributes.find((a) => a.key === key);
  return found && (found.value.stringValue ?? found.value.intValue);
}

async function sdkClient(url, headers = {}) {
  const client = new Client({ name: 'telemetry-tests', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

/** execute_tool of the fixture's `meta`: the `_meta` the downstream server received. */
async function downstreamMeta(client, meta = undefined) {
  const params = { name: 'execute_tool', arguments: { server: 'fault', tool: 'meta', arguments: { note: ARGUMENT } } };
  if (meta) params._meta = meta;
  const result = await client.callTool(params);
  assert.notEqual(result.isError, true, JSON.stringify(result));
  return JSON.parse(result.content[0].text);
}

async function stop(gateway) {
  gateway.child.kill('SIGTERM');
  await gateway.exit;
}

test('serve --http: the inbound traceparent is the server span parent, the downstream call a child span, and its traceparent reaches the server in _meta', async () => {
  const collector = await startCollector();
  const gateway = await serveHttp([traced], {
    discovery: {
      telemetry: { endpoint: collector.url, serviceName: 'trace-test', headers: { 'x-collector-key': COLLECTOR_KEY } },
    },
  });
  try {
    const client = await sdkClient(gateway.url, { traceparent: PARENT, tracestate: 'rojo=00f067aa0ba902b7' });
    const meta = await downstreamMeta(client);
    await client.close();
    // Stopped at once: the spans still queued are sent before the process exits.
    await stop(gateway);

    const spans = collector.spans();
    const server = spans.find((s) => s.name === 'tools/call execute_tool');
    const downstream = spans.find((s) => s.name === 'tools/call meta');
    assert.ok(server, `no server span in ${JSON.stringify(spans.map((s) => s.name))}`);
    // The server span continues the client's trace, under the client's span.
    assert.equal(server.traceId, TRACE_ID);
    assert.equal(server.parentSpanId, CLIENT_SPAN);
    assert.equal(server.kind, 2);
    assert.equal(server.traceState, 'rojo=00f067aa0ba902b7');
    assert.equal(attribute(server, 'mcp.method.name'), 'tools/call');
    assert.equal(attribute(server, 'gen_ai.tool.name'), 'execute_tool');
    assert.equal(attribute(server, 'network.transport'), 'tcp');
    assert.match(attribute(server, 'jsonrpc.request.id'), /^\d+$/);
    assert.equal(attribute(server, 'mcp.protocol.version'), '2025-11-25');
    // The downstream call is a client span under it.
    assert.equal(downstream.traceId, TRACE_ID);
    assert.equal(downstream.parentSpanId, server.spanId);
    assert.equal(downstream.kind, 3);
    assert.equal(attribute(downstream, 'gen_ai.tool.name'), 'meta');
    assert.equal(attribute(downstream, 'anygpt.discovery.server'), 'fault');
    assert.ok(BigInt(downstream.endTimeUnixNano) >= BigInt(downstream.startTimeUnixNano));
    // The downstream server was told the client span's context, the caller's tracestate with it.
    assert.equal(meta.traceparent, `00-${TRACE_ID}-${downstream.spanId}-01`);
    assert.equal(meta.tracestate, 'rojo=00f067aa0ba902b7');
    // Other requests of the session were traced under the same parent (initialize, tools/list).
    assert.ok(spans.some((s) => s.name === 'initialize' && s.parentSpanId === CLIENT_SPAN));

    const exported = collector.exports;
    assert.ok(exported.every((e) => e.path === '/v1/traces' && e.headers['content-type'] === 'application/json'));
    assert.ok(exported.every((e) => e.headers['x-collector-key'] === COLLECTOR_KEY));
    const resource = exported[0].json.resourceSpans[0].resource;
    assert.equal(attribute(resource, 'service.name'), 'trace-test');
    // No argument value anywhere in what was exported, nor the collector's key.
    for (const e of exported) {
      assert.ok(!e.text.includes(ARGUMENT), 'an argument value was exported');
      assert.ok(!e.text.includes(COLLECTOR_KEY));
    }
    assert.ok(!gateway.stderr().includes(COLLECTOR_KEY));
  } finally {
    await stop(gateway);
    await collector.close();
  }
});

test('serve --http: a malformed traceparent starts a fresh trace and is never echoed; a 2026-07-28 request may carry it in _meta', async () => {
  const collector = await startCollector();
  const gateway = await serveHttp([traced], { discovery: { telemetry: { endpoint: `${collector.url}/v1/traces` } } });
  const malformed = `00-${TRACE_ID.toUpperCase()}-${CLIENT_SPAN}-01`;
  try {
    const client = await sdkClient(gateway.url, { traceparent: malformed });
    const meta = await downstreamMeta(client);
    await client.close();
    await waitFor(() => collector.spans().some((s) => s.name === 'tools/call meta'), 10_000);
    const server = collector.spans().find((s) => s.name === 'tools/call execute_tool');
    assert.equal(server.parentSpanId, undefined);
    assert.notEqual(server.traceId, TRACE_ID.toLowerCase());
    assert.match(server.traceId, /^[0-9a-f]{32}$/);
    assert.ok(meta.traceparent.startsWith(`00-${server.traceId}-`), meta.traceparent);
    assert.ok(collector.exports.every((e) => !e.text.includes(TRACE_ID.toUpperCase())));

    // A 2026-07-28 client (no session, no header) puts its context in the request's _meta.
    const other = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`;
    const response = await fetch(gateway.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': '2026-07-28',
        'Mcp-Method': 'tools/call',
        'Mcp-Name': 'list_mcp_servers',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 'req-7',
        method: 'tools/call',
        params: {
          name: 'list_mcp_servers',
          arguments: {},
          _meta: {
            traceparent: other,
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    });
    assert.equal(response.status, 200, await response.clone().text());
    await response.text();
    await waitFor(() => collector.spans().some((s) => s.traceId === 'a'.repeat(32)), 10_000);
    const listed = collector.spans().find((s) => s.traceId === 'a'.repeat(32));
    assert.equal(listed.name, 'tools/call list_mcp_servers');
    assert.equal(listed.parentSpanId, 'b'.repeat(16));
    assert.equal(attribute(listed, 'jsonrpc.request.id'), 'req-7');
    assert.equal(attribute(listed, 'mcp.protocol.version'), '2026-07-28');
  } finally {
    await stop(gateway);
    await collector.close();
  }
});

test('serve --http: a collector that is down or never answers costs the calls nothing', async () => {
  const hanging = await startCollector({ hang: true });
  const down = `http://127.0.0.1:${await freePort()}`;
  for (const endpoint of [down, hanging.url]) {
    const gateway = await serveHttp([traced], { discovery: { telemetry: { endpoint } } });
    try {
      const client = await sdkClient(gateway.url, { traceparent: PARENT });
      const started = Date.now();
      for (let i = 0; i < 20; i++) {
        const meta = await downstreamMeta(client);
        assert.ok(meta.traceparent.startsWith(`00-${TRACE_ID}-`));
      }
      // Generous: 20 local calls take well under a second; a call waiting on the export
      // (10 s timeout) would take far longer.
      assert.ok(Date.now() - started < 8_000, `20 calls took ${Date.now() - started} ms`);
      await client.close();
      if (endpoint === down) {
        // The failed export is told once, with what was lost, and counted; calls go on.
        await waitFor(() => /traces: the collector could not be reached.*span\(s\) dropped/.test(gateway.stderr()), 10_000);
        const metrics = await (await fetch(`${gateway.base}/metrics`)).text();
        const dropped = Number(/^discovery_trace_spans_dropped_total (\d+)/m.exec(metrics)?.[1]);
        assert.ok(dropped > 0, metrics);
      }
    } finally {
      await stop(gateway);
    }
  }
  assert.ok(hanging.exports.length >= 1, 'the hanging collector was sent a batch');
  await hanging.close();
});

test('stdio: _meta.traceparent on tools/call parents a server span and the downstream call', async () => {
  const collector = await startCollector();
  const config = writeConfig({ discovery: { servers: [traced], telemetry: { endpoint: collector.url } } });
  const { client } = await startGateway(config);
  try {
    const meta = await downstreamMeta(client, { traceparent: PARENT });
    await waitFor(() => collector.spans().some((s) => s.name === 'tools/call meta'), 10_000);
    const spans = collector.spans();
    const server = spans.find((s) => s.name === 'tools/call execute_tool');
    const downstream = spans.find((s) => s.name === 'tools/call meta');
    assert.equal(server.traceId, TRACE_ID);
    assert.equal(server.parentSpanId, CLIENT_SPAN);
    assert.equal(attribute(server, 'network.transport'), 'pipe');
    assert.equal(downstream.parentSpanId, server.spanId);
    assert.equal(meta.traceparent, `00-${TRACE_ID}-${downstream.spanId}-01`);
    assert.ok(collector.exports.every((e) => !e.text.includes(ARGUMENT)));
  } finally {
    await client.close();
    await collector.close();
  }
});

test('without discovery.telemetry nothing is traced and no traceparent goes downstream', async () => {
  const gateway = await serveHttp([traced]);
  try {
    const client = await sdkClient(gateway.url, { traceparent: PARENT });
    const meta = await downstreamMeta(client);
    await client.close();
    assert.equal(meta.traceparent, undefined);
  } finally {
    await stop(gateway);
  }
});


