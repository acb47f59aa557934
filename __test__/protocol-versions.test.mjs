// The gateway as a server to clients of every protocol version: the official SDK client asks
// for each version it can speak (its `initialize` carries the version we set), gets that very
// version back, and lists and searches tools on it; a version the gateway does not know gets
// the newest one with an `initialize` handshake; a 2026-07-28 client without `initialize`
// (`server/discover` and per-request `_meta`, raw JSON-RPC: the SDK does not speak it yet)
// is served too.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import { bin, isolatedEnv, rawGateway, referenceServer, writeConfig } from './helpers.mjs';

/** The versions the SDK client can speak that have an `initialize` handshake (2024-11-05 on). */
const VERSIONS = SUPPORTED_PROTOCOL_VERSIONS.filter((v) => v >= '2024-11-05').sort();

/** Stdio to the gateway, asking for `version` in `initialize` and noting the one agreed on. */
class VersionedTransport extends StdioClientTransport {
  constructor(version, options) {
    super(options);
    this.version = version;
    this.negotiated = undefined;
  }

  async send(message, options) {
    const asked = message.method === 'initialize' ? { ...message, params: { ...message.params, protocolVersion: this.version } } : message;
    return super.send(asked, options);
  }

  setProtocolVersion(version) {
    this.negotiated = version;
  }
}

const config = () => writeConfig({ discovery: { servers: [referenceServer('memory')] } });

/** `search_tools` until the memory server's tools are indexed (the gateway starts at once). */
async function search(request) {
  for (const until = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 200))) {
    const result = await request('search_tools', { query: 'create entities' });
    const body = JSON.parse(result.content[0].text);
    if (body.results?.length || Date.now() > until) return { result, body };
  }
}

async function withClientOn(version, body) {
  const transport = new VersionedTransport(version, { command: process.execPath, args: [bin, '--config', config()], env: isolatedEnv(), stderr: 'pipe' });
  const client = new Client({ name: 'versions-test', version: '0.0.0' });
  await client.connect(transport);
  try {
    await body(client, transport);
  } finally {
    await client.close();
  }
}

test('the SDK knows the versions this test walks through', () => {
  assert.deepEqual(VERSIONS.slice(0, 4), ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25']);
});

for (const version of VERSIONS) {
  test(`a client on ${version} gets ${version}, the five meta-tools and a search`, async () => {
    await withClientOn(version, async (client, transport) => {
      assert.equal(transport.negotiated, version);
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name), ['list_mcp_servers', 'search_tools', 'list_tools', 'get_tool_details', 'execute_tool']);
      const { result, body } = await search((name, args) => client.callTool({ name, arguments: args }));
      assert.equal(result.isError, false);
      assert.equal(body.results[0]?.server, 'memory', JSON.stringify(body));
      assert.equal(body.results[0].tool, 'create_entities');
    });
  });
}

test('a client asking for a version the gateway does not know gets the newest with initialize', async () => {
  await withClientOn('2099-01-01', async (client, transport) => {
    assert.equal(transport.negotiated, '2025-11-25');
    assert.equal((await client.listTools()).tools.length, 5);
  });
});

test('a 2026-07-28 client: server/discover, then requests carrying their own _meta', async () => {
  const gateway = rawGateway(['--config', config()]);
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'raw-2026', version: '0' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  let id = 0;
  const request = async (method, params = {}) => {
    id += 1;
    gateway.send({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } });
    const answer = await gateway.next();
    assert.equal(answer.id, id, JSON.stringify(answer));
    assert.equal(answer.error, undefined, JSON.stringify(answer.error));
    return answer.result;
  };
  try {
    const discovered = await request('server/discover');
    assert.ok(discovered.supportedVersions.includes('2026-07-28'), JSON.stringify(discovered));
    for (const older of VERSIONS) assert.ok(discovered.supportedVersions.includes(older), older);
    assert.equal(discovered._meta?.['io.modelcontextprotocol/serverInfo']?.name, 'anygpt-discovery', JSON.stringify(discovered));
    const listed = await request('tools/list');
    assert.equal(listed.tools.length, 5);
    const { result, body } = await search((name, args) => request('tools/call', { name, arguments: args }));
    assert.equal(result.isError, false);
    assert.equal(body.results[0]?.tool, 'create_entities', JSON.stringify(body));
  } finally {
    gateway.child.stdin.end();
    await gateway.exit;
  }
});
