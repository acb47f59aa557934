// Shared by the trust tests: the hostile fixture server as a config entry.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { root, tempDir } from './helpers.mjs';

const hostile = join(root, '__test__/fixtures/hostile-server.mjs');

/**
 * A stdio server entry for `fixtures/hostile-server.mjs` serving `tools`, written to a file the
 * test may rewrite (`file`) to change the tools between runs or live.
 */
export function hostileServer(name, tools, dir = tempDir()) {
  const file = join(dir, `${name}-tools.json`);
  writeFileSync(file, JSON.stringify(tools));
  return { entry: { name, connection: { command: process.execPath, args: [hostile, '--tools', file] } }, file };
}

/** Poll the async `probe` until it returns something truthy (or `ms` pass); returns it. */
export async function eventually(probe, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
}
