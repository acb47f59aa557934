// The config files themselves (#24 part 7): a config others can write is refused with the
// `chmod` that fixes it, before anything in it is used; a symlinked config (as dotfile managers
// link them) reloads when its target is edited. Both faces: the native binary and the npm bin,
// real reference servers, the official client.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { hostTriple } from '../scripts/host.mjs';
import { bin, call, isolatedEnv, referenceServer, root, spawnGateway, tempDir, waitFor } from './helpers.mjs';

const native = join(root, 'target', hostTriple(), 'debug/anygpt-discovery');
const faces = [['the native binary', native], ['the npm bin', process.execPath]];

/** Run a CLI command through `command`; resolves with { code, stdout, stderr }. */
function run(command, args, env) {
  const argv = command === process.execPath ? [bin, ...args] : args;
  return new Promise((resolve) => {
    execFile(command, argv, { env: isolatedEnv(env) }, (error, stdout, stderr) => {
      resolve({ code: error ? error.code : 0, stdout, stderr });
    });
  });
}

const configOf = (...servers) => JSON.stringify({ discovery: { servers } });

describe('a config others can write', () => {
  for (const [face, command] of faces) {
    test(`is refused by ${face}, naming the file and the chmod, and starts nothing`, async () => {
      const dir = tempDir();
      const marker = join(dir, 'owned');
      const path = join(dir, 'config.json');
      writeFileSync(path, configOf({ name: 'x', connection: { command: 'sh', args: ['-c', `touch ${marker}`] } }));
      chmodSync(path, 0o664);
      const refused = await run(command, ['list', '--config', path]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /writable by its group \(mode 664\)/);
      assert.ok(refused.stderr.includes(`chmod go-w '${path}'`), refused.stderr);
      assert.equal(existsSync(marker), false, 'the refused file started nothing');

      chmodSync(path, 0o644);
      const accepted = await run(command, ['config', 'validate', '--config', path]);
      assert.equal(accepted.code, 0, accepted.stderr);
    });
  }
});

describe('a symlinked config', () => {
  for (const [face, command] of faces) {
    test(`reloads in ${face} when the file it links to is edited`, async () => {
      const dir = tempDir();
      const dotfiles = join(dir, 'dotfiles');
      mkdirSync(dotfiles);
      const target = join(dotfiles, 'config.json');
      writeFileSync(target, configOf(referenceServer('everything', ['stdio'])));
      const link = join(dir, 'config.json');
      symlinkSync(target, link);
      const gateway = await spawnGateway(['--config', link], { command });
      try {
        const before = await call(gateway.client, 'list_mcp_servers');
        assert.deepEqual(before.body.servers.map((s) => s.name), ['everything']);
        // Edited in place, where the link points: the folder of the link sees nothing.
        writeFileSync(target, configOf(referenceServer('everything', ['stdio']), referenceServer('memory')));
        assert.ok(await waitFor(() => /config reloaded.*added=1/.test(gateway.stderr()), 10_000), gateway.stderr());
        const after = await call(gateway.client, 'list_mcp_servers');
        assert.deepEqual(after.body.servers.map((s) => s.name), ['everything', 'memory']);
      } finally {
        await gateway.client.close();
        await gateway.exit;
      }
    });
  }
});
