// The config files themselves (#24 part 7): a config others can write is refused with the
// `chmod` that fixes it, before anything in it is used; a symlinked config (as dotfile managers
// link them) reloads when its target is edited; a project's config, even approved, keeps the
// audit log inside the state folder. Both faces: the native binary and the npm bin,
// real reference servers, the official client.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
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
      // Writable by every user; and, where the test may give the file a group that is not the
      // owner's private one (as root), by that group.
      const cases = [[0o646, /writable by every user \(mode 646\)/]];
      if (process.getuid?.() === 0) cases.push([0o664, /writable by its group \(mode 664\)/]);
      for (const [mode, said] of cases) {
        if (mode === 0o664) chownSync(path, 0, 4242);
        chmodSync(path, mode);
        const refused = await run(command, ['list', '--config', path]);
        assert.notEqual(refused.code, 0);
        assert.match(refused.stderr, said);
        assert.ok(refused.stderr.includes(`chmod go-w '${path}'`), refused.stderr);
        assert.equal(existsSync(marker), false, 'the refused file started nothing');
      }

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

describe("a project's config naming paths", () => {
  for (const [face, command] of faces) {
    test(`may not put the audit log outside the state folder, even approved (${face})`, () => {
      const dir = tempDir();
      const home = join(dir, 'home');
      const project = join(dir, 'project');
      mkdirSync(join(project, '.anygpt'), { recursive: true });
      mkdirSync(home);
      const bashrc = join(home, '.bashrc');
      writeFileSync(bashrc, 'export PATH=/usr/bin\n');
      const file = join(project, '.anygpt/mcp-discovery.config.json');
      writeFileSync(file, JSON.stringify({ discovery: { audit: { path: '~/.bashrc', includeArguments: true }, servers: [referenceServer('memory')] } }));
      const env = isolatedEnv({ HOME: home, USERPROFILE: home, XDG_CONFIG_HOME: join(home, '.config') });
      const cli = (...args) => spawnSync(command, command === process.execPath ? [bin, ...args] : args, { cwd: project, env, encoding: 'utf8' });

      assert.equal(cli('allow', '--yes', file).status, 0);
      const refused = cli('execute', 'memory', 'read_graph', '--args', '{}');
      assert.equal(refused.status, 2, refused.stderr);
      assert.match(refused.stderr, /discovery\.audit\.path: a project's config may only put the audit log inside the state folder/);
      assert.equal(readFileSync(bashrc, 'utf8'), 'export PATH=/usr/bin\n');

      // Inside the state folder it is honoured (a relative path is taken there).
      writeFileSync(file, JSON.stringify({ discovery: { audit: { path: 'project.jsonl' }, servers: [referenceServer('memory')] } }));
      assert.equal(cli('allow', '--yes', file).status, 0);
      const ran = cli('execute', 'memory', 'read_graph', '--args', '{}');
      assert.equal(ran.status, 0, ran.stderr);
      const line = JSON.parse(readFileSync(join(env.ANYGPT_DISCOVERY_STATE_DIR, 'project.jsonl'), 'utf8').split('\n')[0]);
      assert.deepEqual([line.server, line.tool, line.outcome], ['memory', 'read_graph', 'ok']);
    });
  }
});
