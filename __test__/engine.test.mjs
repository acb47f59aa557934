// The Node API: DiscoveryEngine over the same real reference servers, without MCP in between.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DiscoveryEngine, matchPattern } from '../index.js';
import { alive, demoConfig, demoFiles, descendants, referenceServer, serverPaths, tempDir, waitFor } from './helpers.mjs';

// The engine runs in this process: keep its snapshots and audit log out of the user's folders.
process.env.ANYGPT_DISCOVERY_CACHE_DIR = tempDir('anygpt-discovery-cache-');
process.env.ANYGPT_DISCOVERY_STATE_DIR = tempDir('anygpt-discovery-state-');

const demo = JSON.parse(readFileSync(demoConfig, 'utf8'));

describe('DiscoveryEngine on the demo servers', () => {
  let engine;
  before(() => {
    engine = new DiscoveryEngine(demo, demoConfig);
  });
  after(async () => {
    await engine.close();
  });

  test('listServers reports every server connected with counts', async () => {
    const servers = await engine.listServers();
    assert.deepEqual(servers.map((s) => [s.name, s.status]), [
      ['everything', 'connected'], ['filesystem', 'connected'], ['memory', 'connected'],
    ]);
    for (const server of servers) assert.ok(server.toolCount >= server.enabledCount && server.enabledCount > 0);
  });

  test('searchTools ranks the exact name first, and server:tool too', async () => {
    for (const query of ['echo', 'everything:echo', 'everything.echo', 'everything__echo']) {
      const { results } = await engine.searchTools(query);
      assert.deepEqual([results[0].server, results[0].tool, results[0].relevance], ['everything', 'echo', 1], query);
    }
  });

  test('searchTools honours server and limit, and is deterministic', async () => {
    const first = await engine.searchTools('file', { server: 'filesystem', limit: 3 });
    assert.ok(first.results.length > 0 && first.results.length <= 3);
    assert.ok(first.results.every((r) => r.server === 'filesystem'));
    const again = await engine.searchTools('file', { server: 'filesystem', limit: 3 });
    assert.deepEqual(again, first);
  });

  test('searchTools hides disabled tools unless includeDisabled', async () => {
    const hidden = await engine.searchTools('write_file');
    assert.ok(!hidden.results.some((r) => r.tool === 'write_file'));
    const shown = await engine.searchTools('write_file', { includeDisabled: true });
    assert.deepEqual([shown.results[0].tool, shown.results[0].enabled], ['write_file', false]);
  });

  test('getToolDetails returns the schema as the server gave it', async () => {
    const details = await engine.getToolDetails('everything', 'echo');
    assert.equal(details.inputSchema.properties.message.type, 'string');
    assert.deepEqual(details.inputSchema.required, ['message']);
  });

  test('executeTool round-trips echo and reads a file', async () => {
    const echo = await engine.executeTool('everything', 'echo', { message: 'from node' });
    assert.deepEqual(echo.content, [{ type: 'text', text: 'Echo: from node' }]);
    const file = await engine.executeTool('filesystem', 'read_text_file', { path: join(demoFiles, 'hello.txt') });
    assert.match(file.content[0].text, /Hello from the @anygpt\/discovery demo/);
  });

  test('executeTool reports the server\'s progress to onProgress', async () => {
    const seen = [];
    const result = await engine.executeTool('everything', 'trigger-long-running-operation', { duration: 0.3, steps: 3 }, {
      onProgress: (p) => seen.push(p),
    });
    assert.match(result.content[0].text, /completed/);
    // Progress and the result reach JS through different queues: wait for the last report.
    await waitFor(() => seen.length === 3, 2000);
    assert.deepEqual(seen.map((p) => [p.progress, p.total]), [[1, 3], [2, 3], [3, 3]]);
  });

  test('an onProgress that throws becomes a warning, not a crash', async () => {
    const warnings = [];
    const onWarning = (warning) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const result = await engine.executeTool('everything', 'trigger-long-running-operation', { duration: 0.2, steps: 2 }, {
        onProgress: () => {
          throw new Error('callback bug');
        },
      });
      assert.match(result.content[0].text, /completed/);
      await waitFor(() => warnings.length === 2, 2000);
      assert.ok(warnings.every((m) => m.includes('callback bug')), JSON.stringify(warnings));
    } finally {
      process.off('warning', onWarning);
    }
  });

  test('executeTool honours an AbortSignal', async () => {
    const controller = new AbortController();
    const started = Date.now();
    const pending = engine.executeTool('everything', 'trigger-long-running-operation', { duration: 20, steps: 20 }, {
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 200);
    await assert.rejects(pending, { name: 'AbortError' });
    assert.ok(Date.now() - started < 5000, 'the call ended with the abort, not with the operation');
    await assert.rejects(
      engine.executeTool('everything', 'echo', { message: 'never sent' }, { signal: AbortSignal.abort(new Error('stop')) }),
      { message: 'stop' },
    );
    // A signal that never fires changes nothing.
    const echo = await engine.executeTool('everything', 'echo', { message: 'with a signal' }, { signal: new AbortController().signal });
    assert.equal(echo.content[0].text, 'Echo: with a signal');
  });

  test('a downstream tool error comes back as the server result with isError', async () => {
    const result = await engine.executeTool('filesystem', 'read_text_file', { path: join(demoFiles, 'missing.txt') });
    assert.equal(result.isError, true);
  });

  test('errors carry a stable code', async () => {
    await assert.rejects(engine.executeTool('filesystem', 'write_file', { path: join(demoFiles, 'x.txt'), content: 'x' }), {
      code: 'TOOL_DISABLED',
      message: 'tool `filesystem:write_file` is disabled by toolRules',
    });
    assert.equal(existsSync(join(demoFiles, 'x.txt')), false);
    await assert.rejects(engine.executeTool('everything', 'ecko', {}), { code: 'TOOL_NOT_FOUND' });
    await assert.rejects(engine.listTools('nope'), { code: 'SERVER_NOT_FOUND' });
    await assert.rejects(engine.searchTools(''), { code: 'VALIDATION_ERROR' });
    await assert.rejects(engine.searchTools('x', { limit: 0 }), { code: 'VALIDATION_ERROR' });
  });

  test('listTools marks disabled tools and their tags', async () => {
    const all = await engine.listTools('memory', true);
    const deletes = all.filter((t) => t.name.startsWith('delete_'));
    assert.ok(deletes.length > 0);
    for (const tool of deletes) assert.deepEqual([tool.enabled, tool.tags], [false, ['dangerous']]);
    const enabled = await engine.listTools('memory');
    assert.ok(enabled.every((t) => t.enabled));
  });
});

describe('DiscoveryEngine config', () => {
  test('a bad config throws CONFIGURATION_ERROR naming the path', () => {
    assert.throws(() => new DiscoveryEngine({ discovery: { toolRules: [{ pattern: ['[oops'] }] } }), (error) => {
      assert.equal(error.code, 'CONFIGURATION_ERROR');
      assert.match(error.message, /discovery\.toolRules\[0\]\.pattern\[0\]/);
      return true;
    });
    assert.throws(() => new DiscoveryEngine({ servers: [{ name: 'x', connection: { args: [] } }] }), {
      code: 'CONFIGURATION_ERROR',
      message: /discovery\.servers\[0\]\.connection\.command/,
    });
  });

  test('getConfig hides secrets but keeps variable references', () => {
    const engine = new DiscoveryEngine({
      servers: [{ name: 'gh', connection: { command: 'x', env: { A: 'ghp_secret', B: '${GITHUB_TOKEN}' } } }],
    });
    const shown = JSON.stringify(engine.getConfig());
    assert.ok(!shown.includes('ghp_secret'));
    assert.ok(shown.includes('${GITHUB_TOKEN}'));
  });

  test('reload switches to a new config', async () => {
    const engine = new DiscoveryEngine({ servers: [referenceServer('everything', ['stdio'])] });
    try {
      assert.deepEqual((await engine.listServers()).map((s) => s.name), ['everything']);
      await engine.reload({ servers: [referenceServer('memory')] });
      assert.deepEqual((await engine.listServers()).map((s) => s.name), ['memory']);
      await assert.rejects(engine.listTools('everything'), { code: 'SERVER_NOT_FOUND' });
    } finally {
      await engine.close();
    }
  });

  test('close ends every server process', async () => {
    // No snapshot: both servers must start now (an earlier test left a snapshot of `memory`).
    const engine = new DiscoveryEngine({
      cache: { enabled: false },
      servers: [referenceServer('filesystem', [tempDir()]), referenceServer('memory')],
    });
    const before = new Set(descendants(process.pid));
    await engine.listServers();
    const started = descendants(process.pid).filter((pid) => !before.has(pid));
    assert.ok(started.length >= 2, `expected two server processes, found ${started}`);
    await engine.close();
    await waitFor(() => started.every((pid) => !alive(pid)), 2000);
    assert.deepEqual(started.filter(alive), []);
  });
});

describe('matchPattern', () => {
  const cases = [
    ['github_create_issue', ['*github*'], true],
    ['gitlab_issue', ['*github*'], false],
    ['github_list', ['github_*'], true],
    ['create_issue', ['*_issue'], true],
    ['delete_file', ['!*delete*', '*'], false],
    ['read_file', ['!*delete*', '*'], true],
    ['GitHub_Create_Issue', ['/github.*issue/i'], true],
    ['fs_read', ['/^fs_(read|write)$/'], true],
    ['fs_read_all', ['/^fs_(read|write)$/'], false],
    ['update', ['/\\b(create|update)\\b/'], true],
  ];
  for (const [name, patterns, expected] of cases) {
    test(`${name} ${expected ? 'matches' : 'does not match'} ${JSON.stringify(patterns)}`, () => {
      assert.equal(matchPattern(name, patterns), expected);
    });
  }

  test('an invalid pattern throws CONFIGURATION_ERROR with its index', () => {
    assert.throws(() => matchPattern('x', ['ok', '/(/']), { code: 'CONFIGURATION_ERROR', message: /patterns\[1\]/ });
  });
});

test('serverPaths point at installed reference servers', () => {
  for (const path of Object.values(serverPaths)) assert.ok(existsSync(path), `${path} missing: run npm install`);
});
