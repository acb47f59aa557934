// Reload without dropping work (#12 part 6): servers launched the same way keep their process,
// changed ones restart, removed ones stop once their calls in flight end, and a bad config
// edit while serving leaves the old config running. Real reference servers, real processes
// (their pids read from /proc), the official client for the bin.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { DiscoveryEngine } from '../index.js';
import { alive, call, descendants, referenceServer, root, spawnGateway, tempDir, waitFor, writeConfig } from './helpers.mjs';

// The engine runs in this process: keep its snapshots and audit log out of the user's folders.
process.env.ANYGPT_DISCOVERY_CACHE_DIR = tempDir('anygpt-discovery-cache-');
process.env.ANYGPT_DISCOVERY_STATE_DIR = tempDir('anygpt-discovery-state-');

const faultServer = join(root, '__test__/fixtures/fault-server.mjs');
const fault = (name, ...args) => ({ name, connection: { command: process.execPath, args: [faultServer, ...args] } });

/** The pid of the live process under `parent` whose command line mentions `script`. */
function pidOf(script, parent = process.pid) {
  return descendants(parent).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(script);
    } catch {
      return false;
    }
  });
}

const everythingScript = 'server-everything/dist/index.js';
const memoryScript = 'server-memory/dist/index.js';

describe('DiscoveryEngine.reload', () => {
  const engines = [];
  after(async () => {
    for (const engine of engines) await engine.close();
  });

  test('keeps unchanged servers (same pid), restarts changed ones, stops removed ones, starts added ones', async () => {
    const engine = new DiscoveryEngine({
      servers: [referenceServer('everything', ['stdio']), referenceServer('memory'), fault('fault')],
      toolRules: [{ pattern: '*echo*', tags: ['before'] }],
    });
    engines.push(engine);
    const before = await engine.listServers();
    assert.deepEqual(before.map((s) => s.status), ['connected', 'connected', 'connected']);
    const everything = pidOf(everythingScript);
    const memory = pidOf(memoryScript);
    const faultPid = JSON.parse((await engine.executeTool('fault', 'pids', {})).content[0].text).server;
    assert.ok(everything && memory && faultPid);

    const summary = await engine.reload({
      servers: [
        referenceServer('everything', ['stdio'], { description: 'now described' }),
        // Same server, another launch (an env entry): a restart.
        { ...referenceServer('memory'), connection: { ...referenceServer('memory').connection, env: { MEMORY_FILE_PATH: join(tempDir(), 'm.json') } } },
        fault('added', '--extra-tool', 'fresh_tool'),
      ],
      toolRules: [{ pattern: '*echo*', tags: ['after'] }],
    });
    assert.deepEqual(summary, { kept: ['everything'], restarted: ['memory'], stopped: ['fault'], added: ['added'] });

    assert.equal(pidOf(everythingScript), everything, 'the unchanged server kept its process');
    assert.ok(alive(everything));
    assert.ok(await waitFor(() => !alive(memory), 5000), 'the changed server’s old process ended');
    assert.ok(await waitFor(() => !alive(faultPid), 5000), 'the removed server ended');

    const after = await engine.listServers();
    assert.deepEqual(after.map((s) => [s.name, s.status]), [
      ['everything', 'connected'], ['memory', 'connected'], ['added', 'connected'],
    ]);
    assert.equal(after[0].description, 'now described', 'settings follow the config without a restart');
    const restarted = pidOf(memoryScript);
    assert.ok(restarted && restarted !== memory, 'the changed server runs in a new process');
    // The kept server's tools are served again, with the new rules applied.
    const echo = await engine.getToolDetails('everything', 'echo');
    assert.deepEqual(echo.tags, ['after']);
    const { results } = await engine.searchTools('fresh_tool');
    assert.equal(results[0]?.server, 'added');
    await assert.rejects(engine.listTools('fault'), { code: 'SERVER_NOT_FOUND' });
    // And the kept session still works.
    const result = await engine.executeTool('everything', 'echo', { message: 'still here' });
    assert.match(result.content[0].text, /still here/);
    assert.equal(pidOf(everythingScript), everything);
  });

  test('a removed server stops only after its call in flight completes', async () => {
    const engine = new DiscoveryEngine({ servers: [fault('slow'), fault('stays')] });
    engines.push(engine);
    const pid = JSON.parse((await engine.executeTool('slow', 'pids', {})).content[0].text).server;
    const running = engine.executeTool('slow', 'progress', { steps: 6, intervalMs: 200 });
    await new Promise((r) => setTimeout(r, 200));
    const summary = await engine.reload({ servers: [fault('stays')] });
    assert.deepEqual(summary.stopped, ['slow']);
    assert.deepEqual(summary.kept, ['stays']);
    assert.ok(alive(pid), 'still serving its call');
    const result = await running;
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.ok(await waitFor(() => !alive(pid), 5000), 'ended once its call did');
  });

  test('a bad config is rejected and the current one keeps serving', async () => {
    const engine = new DiscoveryEngine({ servers: [fault('a')] });
    engines.push(engine);
    const pid = JSON.parse((await engine.executeTool('a', 'pids', {})).content[0].text).server;
    await assert.rejects(engine.reload({ servers: [{ name: 'a', connection: {} }] }), {
      code: 'CONFIGURATION_ERROR',
      message: /discovery\.servers\[0\]\.connection\.command/,
    });
    assert.deepEqual(engine.getConfig().discovery.servers.map((s) => s.name), ['a']);
    const again = JSON.parse((await engine.executeTool('a', 'pids', {})).content[0].text).server;
    assert.equal(again, pid);
  });

  test('reload() with no config reads the file again; unchanged, nothing restarts', async () => {
    const path = writeConfig({ discovery: { servers: [fault('a')] } });
    const engine = new DiscoveryEngine(JSON.parse(readFileSync(path, 'utf8')), path);
    engines.push(engine);
    const pid = JSON.parse((await engine.executeTool('a', 'pids', {})).content[0].text).server;
    assert.deepEqual(await engine.reload(), { kept: ['a'], restarted: [], stopped: [], added: [] });
    writeFileSync(path, JSON.stringify({ discovery: { servers: [fault('a'), fault('b')] } }));
    assert.deepEqual(await engine.reload(), { kept: ['a'], restarted: [], stopped: [], added: ['b'] });
    assert.equal(JSON.parse((await engine.executeTool('a', 'pids', {})).content[0].text).server, pid);
  });
});

describe('the gateway watches its config file', () => {
  test('an edit applies without restarting unchanged servers; a bad edit keeps the old config', async () => {
    const dir = tempDir();
    const path = writeConfig({ discovery: { servers: [referenceServer('everything', ['stdio'])] } }, dir);
    const gateway = await spawnGateway(['--config', path]);
    let listChanged = 0;
    gateway.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      listChanged += 1;
    });
    try {
      const { body } = await call(gateway.client, 'list_mcp_servers');
      assert.deepEqual(body.servers.map((s) => [s.name, s.status]), [['everything', 'connected']]);
      const pid = pidOf(everythingScript, gateway.child.pid);
      assert.ok(pid);

      // A bad edit (a syntax error) is reported; the old config keeps serving.
      writeFileSync(path, '{ "discovery": { "servers": [ }');
      assert.ok(
        await waitFor(() => gateway.stderr().includes('config reload failed'), 5000),
        gateway.stderr(),
      );
      assert.match(gateway.stderr(), /still serving the previous config/);
      const kept = await call(gateway.client, 'search_tools', { query: 'echo' });
      assert.equal(kept.body.results[0].server, 'everything');

      // A good edit: the new server starts, the unchanged one keeps its process.
      writeFileSync(path, JSON.stringify({ discovery: { servers: [referenceServer('everything', ['stdio']), referenceServer('memory')] } }));
      assert.ok(await waitFor(() => /config reloaded.*kept=1.*added=1 \(memory\)/.test(gateway.stderr()), 5000), gateway.stderr());
      const { body: now } = await call(gateway.client, 'list_mcp_servers');
      assert.deepEqual(now.servers.map((s) => s.name), ['everything', 'memory']);
      assert.equal(pidOf(everythingScript, gateway.child.pid), pid, 'same process');
      assert.ok(pidOf(memoryScript, gateway.child.pid), 'the added server runs');
      // One reload per edit, one log line each (the editor's burst of events is debounced).
      assert.equal(gateway.stderr().match(/config reloaded/g).length, 1, gateway.stderr());

      // The client's view — the five meta-tools — did not change: no tools/list_changed.
      const { tools } = await gateway.client.listTools();
      assert.equal(tools.length, 5);
      assert.equal(listChanged, 0);
    } finally {
      await gateway.client.close();
      await gateway.exit;
    }
  });
});
