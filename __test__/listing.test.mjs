// A server's tool list on a bad day: one invalid tool, more tools than the gateway serves, a
// name listed twice. Our listing fixture (raw JSON-RPC lines) behind the gateway — the native
// binary driven by the official SDK client, and the Node API — each fault beside healthy tools.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { hostTriple } from '../scripts/host.mjs';
import { call, root, spawnGateway, tempDir, writeConfig } from './helpers.mjs';

const fixture = join(root, '__test__/fixtures/listing-server.mjs');
const native = join(root, 'target', hostTriple(), 'debug/anygpt-discovery');

/** A config entry for the listing fixture with `flags`. */
const listingServer = (name, flags = []) => ({
  name,
  connection: { command: process.execPath, args: [fixture, ...flags] },
  startupTimeoutMs: 60_000,
});

async function gatewayWith(servers) {
  const config = writeConfig({ discovery: { servers } });
  return spawnGateway(['--config', config], { command: native });
}

const serversOf = async (client) => (await call(client, 'list_mcp_servers')).body.servers;

/** Peak resident memory of `pid` in MiB (Linux /proc). */
function peakRssMib(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)[1]) / 1024;
}

describe('tool lists', () => {
  test('one invalid tool among 20 is dropped by name and reason; the other 19 are served', async () => {
    const kinds = {
      'schema-string': { name: 't7', reason: /`inputSchema` is a string, not a JSON Schema object/ },
      'schema-missing': { name: 't7', reason: /no `inputSchema`/ },
      deep: { name: '#7', reason: /nested deeper than 128 levels/ },
      'name-number': { name: '#7', reason: /no `name` string/ },
    };
    const gateway = await gatewayWith(Object.keys(kinds).map((kind) => listingServer(kind, ['--invalid', kind])));
    try {
      const servers = await serversOf(gateway.client);
      for (const [kind, { name, reason }] of Object.entries(kinds)) {
        const server = servers.find((s) => s.name === kind);
        assert.equal(server.status, 'connected', `${kind}: ${JSON.stringify(server)}`);
        assert.equal(server.toolCount, 19, kind);
        assert.equal(server.droppedTools.length, 1, kind);
        assert.equal(server.droppedTools[0].name, name, kind);
        assert.match(server.droppedTools[0].reason, reason, kind);
        const listed = (await call(gateway.client, 'list_tools', { server: kind })).body;
        assert.ok(!JSON.stringify(listed).includes('"t7"'), `${kind}: t7 is not listed`);
        const result = await gateway.client.callTool({
          name: 'execute_tool', arguments: { server: kind, tool: 't8', arguments: {} },
        });
        assert.equal(result.content[0].text, 'called t8', kind);
      }
      // The log names the server, the tool and why.
      assert.match(gateway.stderr(), /tool dropped.*server.*schema-string.*tool.*t7/s);
    } finally {
      await gateway.client.close();
    }
  });

  test('100,000 tools in one page: the first 10,000 served, the cut stated, memory measured', async () => {
    const gateway = await gatewayWith([listingServer('huge', ['--count', '100000']), listingServer('small')]);
    try {
      const servers = await serversOf(gateway.client);
      const huge = servers.find((s) => s.name === 'huge');
      assert.equal(huge.status, 'connected', JSON.stringify(huge));
      assert.equal(huge.toolCount, 10_000);
      assert.equal(huge.toolsCutAt, 10_000);
      assert.equal(servers.find((s) => s.name === 'small').toolsCutAt, undefined);
      const first = await gateway.client.callTool({
        name: 'execute_tool', arguments: { server: 'huge', tool: 't1', arguments: {} },
      });
      assert.equal(first.content[0].text, 'called t1');
      const beyond = await gateway.client.callTool({
        name: 'execute_tool', arguments: { server: 'huge', tool: 't10001', arguments: {} },
      });
      assert.equal(JSON.parse(beyond.content[0].text).error.code, 'TOOL_NOT_FOUND');
      const rss = peakRssMib(gateway.child.pid);
      console.log(`gateway peak RSS with a 100,000-tool server: ${rss.toFixed(0)} MiB`);
      // Generous: the point is that the list is not held whole twice (it was > 1 GiB).
      assert.ok(rss < 512, `peak RSS ${rss.toFixed(0)} MiB`);
    } finally {
      await gateway.client.close();
    }
  });

  test('100,000 tools in one page of 27 MB (past the 16 MiB line cap): the first 10,000 served', async () => {
    const gateway = await gatewayWith([listingServer('long', ['--count', '100000', '--pad', '150'])]);
    try {
      const [long] = await serversOf(gateway.client);
      assert.equal(long.status, 'connected', JSON.stringify(long));
      assert.equal(long.toolCount, 10_000);
      assert.equal(long.toolsCutAt, 10_000);
      const rss = peakRssMib(gateway.child.pid);
      console.log(`gateway peak RSS with a 27 MB page: ${rss.toFixed(0)} MiB`);
      assert.ok(rss < 512, `peak RSS ${rss.toFixed(0)} MiB`);
    } finally {
      await gateway.client.close();
    }
  });

  test('paged past the cap: no page after the 10,000th tool is asked for', async () => {
    const log = join(tempDir(), 'pages.log');
    const gateway = await gatewayWith([
      listingServer('paged', ['--count', '25000', '--page-size', '1000', '--page-log', log]),
    ]);
    try {
      const [paged] = await serversOf(gateway.client);
      assert.equal(paged.toolCount, 10_000);
      assert.equal(paged.toolsCutAt, 10_000);
      const asked = readFileSync(log, 'utf8').trim().split('\n');
      assert.deepEqual(asked, ['(first)', ...Array.from({ length: 9 }, (_, i) => String((i + 1) * 1000))]);
    } finally {
      await gateway.client.close();
    }
  });
});

describe('pages without end', () => {
  test('empty pages under ever new cursors fail the start after 1,000 pages, naming why', async () => {
    const gateway = await gatewayWith([listingServer('pager', ['--empty-pages']), listingServer('fine')]);
    try {
      const started = performance.now();
      const servers = await serversOf(gateway.client);
      const pager = servers.find((s) => s.name === 'pager');
      assert.equal(pager.status, 'error', JSON.stringify(pager));
      assert.match(pager.error, /more than 1000 pages of tools\/list/);
      assert.ok(performance.now() - started < 30_000, 'long before its 60 s startup budget');
      assert.equal(servers.find((s) => s.name === 'fine').toolCount, 20);
    } finally {
      await gateway.client.close();
    }
  });
});

describe('a name listed twice (Node API)', () => {
  test('the first is served, the second reported once, and no tool is flagged changed', async () => {
    process.env.ANYGPT_DISCOVERY_CACHE_DIR = tempDir('anygpt-discovery-cache-');
    process.env.ANYGPT_DISCOVERY_STATE_DIR = tempDir('anygpt-discovery-state-');
    const { DiscoveryEngine } = await import('../index.js');
    const config = { discovery: { servers: [listingServer('twice', ['--duplicate'])] } };
    for (const run of ['first start', 'second start (pins compared)']) {
      const engine = new DiscoveryEngine(config);
      try {
        const tools = await engine.listTools('twice');
        assert.equal(tools.filter((t) => t.name === 't1').length, 1, run);
        assert.equal(tools.length, 20, run);
        for (const tool of tools) assert.deepEqual(tool.flags, [], `${run}: ${tool.name}`);
        assert.equal((await engine.getToolDetails('twice', 't1')).description, 'Tool number 1.', run);
        const [server] = await engine.listServers();
        if (run === 'first start') {
          assert.deepEqual(server.droppedTools, [
            { name: 't1', reason: 'listed again under the same name; the first is served' },
          ]);
        }
      } finally {
        await engine.close();
      }
    }
  });
});
