// Static `tools` of a `custom` source (DESIGN §3): indexed without connecting to the server,
// like a snapshot, and replaced by the list the server reports once it connects. Real gateway
// through the npm bin, official client, our fault fixture as the downstream server.
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { call, root, startGateway, tempDir, writeConfig } from './helpers.mjs';

// Pins live beside the snapshots: keep this process's (the Node API's) away from the user's cache.
process.env.ANYGPT_DISCOVERY_CACHE_DIR = tempDir('anygpt-discovery-cache-');
process.env.ANYGPT_DISCOVERY_STATE_DIR = tempDir('anygpt-discovery-state-');
const { DiscoveryEngine } = await import('../index.js');

const fixture = join(root, '__test__/fixtures/fault-server.mjs');

/** A config whose only source is a custom YAML file holding `yaml` (its `servers:` body). */
function customConfig(yaml) {
  const file = join(tempDir(), 'servers.yaml');
  writeFileSync(file, `servers:\n${yaml}`);
  return { discovery: { sources: [{ type: 'custom', path: file }] } };
}

function gatewayWithCustom(yaml) {
  return startGateway(writeConfig(customConfig(yaml)));
}

const fixtureWithStaticEcho = `
  fixture:
    connection:
      command: ${JSON.stringify(process.execPath)}
      args: [${JSON.stringify(fixture)}]
    tools:
      - { name: echo, description: Declared echo. }
      - { name: declared_only, description: Not a tool the server has. }
`;

const names = (body) => body.tools.map((t) => t.name);

describe('static tools of a custom source', () => {
  test('a server that would take long to start: its tools are searchable, listable and described at once', async () => {
    const log = join(tempDir(), 'spawns');
    const gateway = await gatewayWithCustom(`
  slowpoke:
    name: Weather
    connection:
      command: ${JSON.stringify(process.execPath)}
      args: [${JSON.stringify(fixture)}, --spawn-log, ${JSON.stringify(log)}, --start-delay-ms, '600000']
    tools:
      - name: forecast_weather
        description: Forecast the weather for a city, by the hour.
        inputSchema:
          type: object
          properties: { city: { type: string, description: City name } }
          required: [city]
      - name: radar_image
        description: The current rain radar picture.
`);
    try {
      const started = performance.now();
      const { body: found } = await call(gateway.client, 'search_tools', { query: 'weather forecast for a city' });
      const elapsed = performance.now() - started;
      assert.deepEqual([found.results[0].server, found.results[0].tool], ['slowpoke', 'forecast_weather']);
      // Not the 5 s a search waits for servers still starting: nothing was started.
      assert.ok(elapsed < 2000, `search answered after ${Math.round(elapsed)} ms`);

      const { body: listed } = await call(gateway.client, 'list_tools', { server: 'slowpoke' });
      assert.deepEqual(names(listed), ['forecast_weather', 'radar_image']);
      const { body: details } = await call(gateway.client, 'get_tool_details', { server: 'slowpoke', tool: 'forecast_weather' });
      assert.deepEqual(details.inputSchema, {
        type: 'object',
        properties: { city: { type: 'string', description: 'City name' } },
        required: ['city'],
      });
      const { body: radar } = await call(gateway.client, 'get_tool_details', { server: 'slowpoke', tool: 'radar_image' });
      assert.deepEqual(radar.inputSchema, { type: 'object' }, 'a missing schema is an empty object schema');

      const { body: servers } = await call(gateway.client, 'list_mcp_servers');
      const slowpoke = servers.servers.find((s) => s.name === 'slowpoke');
      assert.equal(slowpoke.status, 'idle', JSON.stringify(slowpoke));
      assert.equal(existsSync(log), false, 'the server was never spawned');
    } finally {
      await gateway.client.close();
    }
  });

  test('once the server connects, the list it reports replaces the static tools', async () => {
    const gateway = await gatewayWithCustom(fixtureWithStaticEcho);
    try {
      const before = await call(gateway.client, 'get_tool_details', { server: 'fixture', tool: 'echo' });
      assert.equal(before.body.description, 'Declared echo.');
      const echoed = await gateway.client.callTool({
        name: 'execute_tool',
        arguments: { server: 'fixture', tool: 'echo', arguments: { message: 'hi' } },
      });
      assert.equal(echoed.content[0].text, 'Echo: hi', JSON.stringify(echoed));
      const { body: listed } = await call(gateway.client, 'list_tools', { server: 'fixture' });
      assert.ok(names(listed).includes('count'), names(listed).join(','));
      assert.ok(!names(listed).includes('declared_only'), names(listed).join(','));
      const after = await call(gateway.client, 'get_tool_details', { server: 'fixture', tool: 'echo' });
      assert.equal(after.body.description, 'Echo a message back.');
    } finally {
      await gateway.client.close();
    }
  });

  test('trusting a server known only by its static tools trusts what the server reports', async () => {
    const engine = new DiscoveryEngine(customConfig(fixtureWithStaticEcho));
    try {
      assert.deepEqual((await engine.listTools('fixture')).map((t) => t.name), ['echo', 'declared_only']);
      const trusted = await engine.trustTools('fixture');
      assert.ok(trusted.includes('count') && trusted.includes('echo'), trusted.join(','));
      assert.ok(!trusted.includes('declared_only'), trusted.join(','));
    } finally {
      await engine.close();
    }
  });
});
