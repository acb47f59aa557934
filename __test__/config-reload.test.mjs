// `anygpt-discovery config reload` (#12 parts 6/7): the command finds the gateways serving the
// same config in the registry under the state directory, asks each to re-read it, and prints
// what each did; a bad config is reported with exit 2 and the old config keeps serving. And a
// serving gateway reloads on SIGHUP (native binary and npm bin). Real gateways (the npm bin and
// the native binary), real reference servers, the official client.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { hostTriple } from '../scripts/host.mjs';
import { createEngine } from '../index.js';
import { bin, call, isolatedEnv, referenceServer, root, spawnGateway, tempDir, waitFor, writeConfig } from './helpers.mjs';

const native = join(root, 'target', hostTriple(), 'debug/anygpt-discovery');

// createEngine runs an engine in this process: keep its snapshots and audit log out of the user's folders.
process.env.ANYGPT_DISCOVERY_CACHE_DIR = tempDir('anygpt-discovery-cache-');
process.env.ANYGPT_DISCOVERY_STATE_DIR = tempDir('anygpt-discovery-state-');

/** Run the CLI through the npm bin; resolves with { code, stdout, stderr }. */
function cli(args, env) {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: isolatedEnv(env) }, (error, stdout, stderr) => {
      resolve({ code: error ? error.code : 0, stdout, stderr });
    });
  });
}

const config = (...servers) => JSON.stringify({ discovery: { servers } });

describe('config reload', () => {
  test('reloads the gateways serving the config and prints each outcome; a bad config exits 2 and keeps the old one', async () => {
    const state = tempDir('anygpt-discovery-state-');
    const env = { ANYGPT_DISCOVERY_STATE_DIR: state };
    const path = writeConfig({ discovery: { servers: [referenceServer('everything', ['stdio'])] } });
    const other = writeConfig({ discovery: { servers: [] } });
    const gateway = await spawnGateway(['--config', path], { env });
    const elsewhere = await spawnGateway(['--config', other], { env });
    try {
      await call(gateway.client, 'list_mcp_servers');
      await call(elsewhere.client, 'list_mcp_servers');
      const registered = readdirSync(join(state, 'gateways')).filter((n) => n.endsWith('.json'));
      assert.equal(registered.length, 2, `${registered}`);

      // Nothing changed: every server kept; only the gateway serving this config was asked.
      const same = await cli(['config', 'reload', '--config', path, '--json'], env);
      assert.equal(same.code, 0, same.stderr);
      const report = JSON.parse(same.stdout);
      assert.equal(report.gateways.length, 1);
      assert.equal(report.others, 1);
      assert.equal(report.gateways[0].pid, gateway.child.pid);
      assert.equal(report.gateways[0].status, 'reloaded');
      assert.deepEqual(
        [report.gateways[0].kept, report.gateways[0].restarted, report.gateways[0].stopped, report.gateways[0].added],
        [['everything'], [], [], []],
      );
      assert.match(gateway.stderr(), /config reloaded/);
      assert.doesNotMatch(elsewhere.stderr(), /config reloaded/);

      // A bad config: exit 2 with the error, and the old config keeps serving.
      writeFileSync(path, '{ "discovery": { "servers": [ }');
      const bad = await cli(['config', 'reload', '--config', path], env);
      assert.equal(bad.code, 2, bad.stdout + bad.stderr);
      assert.match(bad.stdout, new RegExp(`failed gateway ${gateway.child.pid} \\(.*config\\.json\\): .*config\\.json`));
      assert.match(bad.stdout, /the previous config keeps serving/);
      const kept = await call(gateway.client, 'search_tools', { query: 'echo' });
      assert.equal(kept.body.results[0].server, 'everything');

      // Once `config reload` returns, the gateway serves what the file says: the reload it
      // caused read the file after it was written.
      writeFileSync(path, config(referenceServer('everything', ['stdio']), referenceServer('memory')));
      const good = await cli(['config', 'reload', '--config', path], env);
      assert.equal(good.code, 0, good.stdout + good.stderr);
      assert.match(good.stdout, new RegExp(`^reloaded gateway ${gateway.child.pid} .*: kept \\d, restarted 0, stopped 0, added`));
      assert.match(good.stdout, /1 more serving other configs/);
      const { body } = await call(gateway.client, 'list_mcp_servers');
      assert.deepEqual(body.servers.map((s) => s.name), ['everything', 'memory']);

      // --all asks every gateway.
      const all = await cli(['config', 'reload', '--all', '--json'], env);
      assert.equal(all.code, 0, all.stderr);
      assert.deepEqual(JSON.parse(all.stdout).gateways.map((g) => g.pid).sort(), [gateway.child.pid, elsewhere.child.pid].sort());
    } finally {
      await gateway.client.close();
      await elsewhere.client.close();
      await gateway.exit;
      await elsewhere.exit;
    }
    // A gateway that ends removes its entry: nothing is serving any more.
    assert.deepEqual(readdirSync(join(state, 'gateways')), []);
    const none = await cli(['config', 'reload', '--config', path], env);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /no gateway is serving .*config\.json; nothing to reload\. A serving gateway reloads by itself when its config file changes\./);
  });

  test('a stale entry (a gateway killed without cleaning up) is ignored and removed', async () => {
    const state = tempDir('anygpt-discovery-state-');
    const env = { ANYGPT_DISCOVERY_STATE_DIR: state };
    const path = writeConfig({ discovery: { servers: [] } });
    const gateway = await spawnGateway(['--config', path], { env, command: native });
    await call(gateway.client, 'list_mcp_servers');
    gateway.child.kill('SIGKILL');
    await gateway.exit;
    assert.equal(readdirSync(join(state, 'gateways')).length, 2, 'the killed gateway left its entry and lock');
    const none = await cli(['config', 'reload', '--config', path, '--json'], env);
    assert.equal(none.code, 2);
    assert.equal(JSON.parse(none.stdout).error.code, 'NOT_FOUND');
    assert.deepEqual(readdirSync(join(state, 'gateways')), [], 'the stale entry was cleaned');
  });
});

describe('a TS config reloads', () => {
  test('an edit is evaluated again on the JS side; a bad edit keeps the old config; config reload and SIGHUP too', async () => {
    const state = tempDir('anygpt-discovery-state-');
    const env = { ANYGPT_DISCOVERY_STATE_DIR: state };
    const file = join(tempDir(), 'anygpt.config.ts');
    const ts = (...servers) => `import { defineConfig } from ${JSON.stringify(join(root, 'index.js'))};
const servers: Array<{ name: string; connection: { command: string; args: string[] } }> = ${JSON.stringify(servers)};
export default defineConfig({ other: { kept: true }, discovery: { servers } });
`;
    writeFileSync(file, ts(referenceServer('everything', ['stdio'])));
    const gateway = await spawnGateway(['--config', file], { env });
    try {
      await call(gateway.client, 'list_mcp_servers');
      assert.match(gateway.stderr(), /watching the config for changes/);

      writeFileSync(file, ts(referenceServer('everything', ['stdio']), referenceServer('memory')));
      assert.ok(await waitFor(() => /config reloaded.*kept=1.*added=1 \(memory\)/.test(gateway.stderr()), 10000), gateway.stderr());
      const { body } = await call(gateway.client, 'list_mcp_servers');
      assert.deepEqual(body.servers.map((s) => s.name), ['everything', 'memory']);

      // A TypeScript syntax error: reported, and both servers keep serving.
      writeFileSync(file, 'export default defineConfig({ discovery: { servers: [ }');
      assert.ok(await waitFor(() => /config reload failed/.test(gateway.stderr()), 10000), gateway.stderr());
      assert.match(gateway.stderr(), /anygpt\.config\.ts/);
      const still = await call(gateway.client, 'list_mcp_servers');
      assert.deepEqual(still.body.servers.map((s) => s.name), ['everything', 'memory']);

      // `config reload` evaluates it again too, and says what changed.
      writeFileSync(file, ts(referenceServer('everything', ['stdio'])));
      const reload = await cli(['config', 'reload', '--config', file, '--json'], env);
      assert.equal(reload.code, 0, reload.stdout + reload.stderr);
      const [outcome] = JSON.parse(reload.stdout).gateways;
      assert.equal(outcome.status, 'reloaded');
      assert.deepEqual(outcome.kept, ['everything']);
      const after = await call(gateway.client, 'list_mcp_servers');
      assert.deepEqual(after.body.servers.map((s) => s.name), ['everything']);

      // SIGHUP through the npm bin: the file is evaluated again.
      const before = gateway.stderr().match(/config reloaded/g).length;
      gateway.child.kill('SIGHUP');
      assert.ok(await waitFor(() => gateway.stderr().match(/config reloaded/g).length > before, 5000), gateway.stderr());
    } finally {
      await gateway.client.close();
      await gateway.exit;
    }
  });
});

describe('createEngine() with a TS config', () => {
  test('reload() evaluates the file again; a bad file rejects and the old config keeps serving', async () => {
    const file = join(tempDir(), 'anygpt.config.ts');
    const ts = (servers) => `const servers: unknown[] = ${JSON.stringify(servers)};\nexport default { discovery: { servers } };\n`;
    writeFileSync(file, ts([]));
    const engine = await createEngine({ config: file });
    try {
      assert.deepEqual(await engine.listServers(), []);
      writeFileSync(file, ts([referenceServer('memory')]));
      assert.deepEqual(await engine.reload(), { kept: [], restarted: [], stopped: [], added: ['memory'] });
      writeFileSync(file, 'export default { discovery: { servers: [ }');
      await assert.rejects(engine.reload(), (error) => error.code === 'CONFIGURATION_ERROR' && error.message.includes('anygpt.config.ts'));
      assert.deepEqual((await engine.listServers()).map((s) => s.name), ['memory']);
      // An explicit config still wins over the file.
      assert.deepEqual((await engine.reload({ servers: [] })).stopped, ['memory']);
    } finally {
      await engine.close();
    }
  });
});

describe('SIGHUP', () => {
  for (const [face, command] of [['the native binary', native], ['the npm bin', process.execPath]]) {
    test(`makes a gateway served by ${face} reload its config and keep serving`, async () => {
      const path = writeConfig({ discovery: { servers: [referenceServer('everything', ['stdio'])] } });
      const gateway = await spawnGateway(['--config', path], { command });
      try {
        await call(gateway.client, 'list_mcp_servers');
        gateway.child.kill('SIGHUP');
        assert.ok(await waitFor(() => /config reloaded.*kept=1/.test(gateway.stderr()), 5000), gateway.stderr());
        const { body } = await call(gateway.client, 'list_mcp_servers');
        assert.deepEqual(body.servers.map((s) => s.name), ['everything']);
        assert.equal(gateway.child.exitCode, null, 'still running');
      } finally {
        await gateway.client.close();
        await gateway.exit;
      }
    });
  }
});
