// The audit log and the files the gateway keeps: gateways sharing one state directory (several
// editor windows) append and rotate the one audit file without losing a line; audit and
// snapshot files are owner-only; a snapshot dated in the future is not trusted as fresh.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { DiscoveryEngine } from '../index.js';
import { exited, root, tempDir, waitFor } from './helpers.mjs';

const leaky = join(root, '__test__/fixtures/leaky-server.mjs');
const pingServer = { name: 'leaky', connection: { command: process.execPath, args: [leaky] } };
const mode = (path) => statSync(path).mode & 0o777;

// One gateway process: an engine of the Node API calling `ping` `calls` times, 8 at a time.
const writer = `
  const { DiscoveryEngine } = await import(${JSON.stringify(join(root, 'index.js'))});
  const engine = new DiscoveryEngine(JSON.parse(process.env.AUDIT_TEST_CONFIG));
  const calls = Number(process.env.AUDIT_TEST_CALLS);
  let next = 0;
  const worker = async () => {
    while (next < calls) {
      next += 1;
      const result = await engine.executeTool('leaky', 'ping', {});
      if (result.content[0].text !== 'pong') throw new Error('unexpected answer');
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  await engine.close();
`;

test('3 gateways × 2,000 calls leave exactly 6,000 audit lines across the file and its rotation', async () => {
  const stateDir = tempDir('anygpt-discovery-state-');
  const calls = 2000;
  // A line is about 115 bytes: 6,000 are about 700 kB, so one rotation happens and the
  // rotated file is never rotated over again (which would drop it by design).
  const config = { discovery: { servers: [pingServer], audit: { maxBytes: 450_000 } } };
  const children = Array.from({ length: 3 }, () =>
    spawn(process.execPath, ['--input-type=module', '-e', writer], {
      env: {
        ...process.env,
        ANYGPT_DISCOVERY_STATE_DIR: stateDir,
        ANYGPT_DISCOVERY_CACHE_DIR: tempDir('anygpt-discovery-cache-'),
        AUDIT_TEST_CONFIG: JSON.stringify(config),
        AUDIT_TEST_CALLS: String(calls),
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    }),
  );
  const stderr = children.map((child) => {
    let text = '';
    child.stderr.on('data', (chunk) => (text += chunk));
    return () => text;
  });
  const codes = await Promise.all(children.map(exited));
  assert.deepEqual(codes, [0, 0, 0], stderr.map((s) => s()).join('\n'));

  const current = join(stateDir, 'audit.jsonl');
  const rotated = join(stateDir, 'audit.jsonl.1');
  assert.ok(existsSync(rotated), 'the log rotated');
  const lines = [current, rotated].flatMap((path) => readFileSync(path, 'utf8').split('\n').filter(Boolean));
  assert.equal(lines.length, 3 * calls);
  for (const line of lines) {
    const entry = JSON.parse(line);
    assert.equal(entry.tool, 'ping');
    assert.equal(entry.outcome, 'ok');
  }
  for (const path of [current, rotated, `${current}.lock`]) assert.equal(mode(path), 0o600, path);
  assert.ok(statSync(current).size <= 450_000);
});

test('snapshot files are owner-only, and one dated in the future is refreshed from the server', async () => {
  process.env.ANYGPT_DISCOVERY_CACHE_DIR = tempDir('anygpt-discovery-cache-');
  process.env.ANYGPT_DISCOVERY_STATE_DIR = tempDir('anygpt-discovery-state-');
  const catalog = join(process.env.ANYGPT_DISCOVERY_CACHE_DIR, 'catalog');
  const config = { discovery: { servers: [pingServer] } };

  const first = new DiscoveryEngine(config);
  await first.listTools('leaky');
  await first.close();
  const snapshotFile = () => {
    const names = existsSync(catalog) ? readdirSync(catalog).filter((n) => n.startsWith('leaky-')) : [];
    return names.length ? join(catalog, names[0]) : null;
  };
  const path = await waitFor(snapshotFile, 5000);
  assert.ok(path, 'a snapshot was written');
  assert.equal(mode(path), 0o600);
  assert.equal(mode(catalog), 0o700);

  // Forge it: a year ahead, and a tool list the server does not have.
  const forged = JSON.parse(readFileSync(path, 'utf8'));
  forged.savedAtMs = Date.now() + 365 * 24 * 3600 * 1000;
  forged.tools = [{ name: 'forged', description: 'served forever', inputSchema: { type: 'object' } }];
  writeFileSync(path, JSON.stringify(forged));

  const second = new DiscoveryEngine(config);
  try {
    // Stale, so the server is started (listServers waits for that) and its real list
    // replaces the forged one.
    await second.listServers();
    const refreshed = await waitFor(() => JSON.parse(readFileSync(path, 'utf8')).savedAtMs <= Date.now(), 10_000);
    assert.ok(refreshed, 'the future-dated snapshot was rewritten');
    const tools = await second.listTools('leaky');
    assert.ok(tools.some((t) => t.name === 'ping'), JSON.stringify(tools));
    assert.ok(!tools.some((t) => t.name === 'forged'));
    assert.equal(mode(path), 0o600);
  } finally {
    await second.close();
  }
});
