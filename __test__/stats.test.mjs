// Statistics per server and tool: a scripted session through the Node API against real
// reference servers (everything, filesystem) counts exactly the calls made (`getStats()`), and
// the `stats` command rebuilds the same counts from the audit log after the engine is gone.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DiscoveryEngine } from '../index.js';
import { bin, isolatedEnv, referenceServer, tempDir, writeConfig } from './helpers.mjs';

const stateDir = tempDir('anygpt-discovery-state-');
const cacheDir = tempDir('anygpt-discovery-cache-');
// The engine runs in this process: keep its snapshots and audit log out of the user's folders.
process.env.ANYGPT_DISCOVERY_CACHE_DIR = cacheDir;
process.env.ANYGPT_DISCOVERY_STATE_DIR = stateDir;

const root = tempDir();
const config = { discovery: { servers: [referenceServer('everything', ['stdio']), referenceServer('filesystem', [root])] } };

/** The counts of a snapshot, without the timings. */
const counts = (snapshot) => snapshot.tools.map(({ server, tool, calls, ok, toolErrors, errors }) => ({ server, tool, calls, ok, toolErrors, errors }));

const EXPECTED = [
  { server: 'everything', tool: 'echo', calls: 4, ok: 3, toolErrors: 0, errors: { VALIDATION_ERROR: 1 } },
  { server: 'everything', tool: 'nope', calls: 1, ok: 0, toolErrors: 0, errors: { TOOL_NOT_FOUND: 1 } },
  { server: 'filesystem', tool: 'read_text_file', calls: 1, ok: 0, toolErrors: 1, errors: {} },
];

function stats(args) {
  const configPath = writeConfig(config);
  const result = spawnSync(process.execPath, [bin, 'stats', ...args, '--config', configPath], {
    env: isolatedEnv({ ANYGPT_DISCOVERY_STATE_DIR: stateDir, ANYGPT_DISCOVERY_CACHE_DIR: cacheDir }),
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout;
}

describe('statistics', () => {
  let engine;
  let live;
  before(async () => {
    // A call from long ago, by a gateway before this one: only the audit log knows it.
    mkdirSync(stateDir, { recursive: true });
    writeFileSync(
      join(stateDir, 'audit.jsonl'),
      `${JSON.stringify({ time: '2020-01-01T00:00:00.000Z', server: 'everything', tool: 'echo', argumentKeys: ['message'], outcome: 'ok', durationMs: 7 })}\n`,
    );
    engine = new DiscoveryEngine(config);
    for (let i = 0; i < 3; i += 1) await engine.executeTool('everything', 'echo', { message: `hi ${i}` });
    await assert.rejects(engine.executeTool('everything', 'echo', { message: 42 }), { code: 'VALIDATION_ERROR' });
    await assert.rejects(engine.executeTool('everything', 'nope', {}), { code: 'TOOL_NOT_FOUND' });
    const missing = await engine.executeTool('filesystem', 'read_text_file', { path: join(root, 'missing.txt') });
    assert.equal(missing.isError, true);
    live = engine.getStats();
  });
  after(async () => {
    await engine?.close();
  });

  test('getStats() equals the calls the session made', () => {
    assert.deepEqual(counts(live), EXPECTED);
    for (const tool of live.tools) {
      assert.ok(tool.p50Ms <= tool.p95Ms && tool.p95Ms <= tool.maxMs, JSON.stringify(tool));
      assert.equal(tool.buckets.at(-1).leMs, null);
      assert.equal(tool.buckets.at(-1).count, tool.calls);
      assert.ok(Date.parse(tool.lastCall) > Date.now() - 600_000, tool.lastCall);
    }
    assert.deepEqual(counts(engine.getStats('filesystem')), EXPECTED.slice(2));
  });

  test('stats --since 1d rebuilds the same counts from the audit log after the engine is gone', async () => {
    await engine.close();
    const rebuilt = JSON.parse(stats(['--since', '1d', '--json']));
    assert.deepEqual(counts(rebuilt), EXPECTED);
    const echo = rebuilt.tools[0];
    assert.equal(echo.maxMs, live.tools[0].maxMs);
  });

  test('stats without --since counts every line of the log; a server argument keeps its tools', () => {
    const all = JSON.parse(stats(['--json']));
    assert.deepEqual(counts(all)[0], { ...EXPECTED[0], calls: 5, ok: 4 });
    assert.equal(all.tools[0].lastCall, live.tools[0].lastCall);
    const filesystem = JSON.parse(stats(['filesystem', '--json']));
    assert.deepEqual(counts(filesystem), EXPECTED.slice(2));
  });

  test('stats for people: one aligned line per tool', () => {
    const lines = stats(['--since', '1d']).trimEnd().split('\n');
    assert.match(lines[0], /^TOOL\s+CALLS\s+OK\s+ISERROR\s+ERRORS\s+P50\s+P95\s+MAX\s+LAST CALL$/);
    assert.match(lines[1], /^everything:echo\s+4\s+3\s+0\s+VALIDATION_ERROR×1\s+/);
    assert.equal(lines.length, 4);
  });
});
