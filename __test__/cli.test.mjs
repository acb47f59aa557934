// The CLI through Node: `runCli(args)` exported by the package (how the AnyGPT CLI mounts the
// commands as `anygpt mcp …`) prints what the bin prints and resolves with the same exit
// code; a TS config is evaluated for the commands too.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { allow, bin, demoConfig, isolatedEnv, root, serverPaths, tempDir } from './helpers.mjs';

/** Run `runCli(args)` in a fresh Node process (it writes to that process's stdout). */
function runCliInNode(args, options = {}) {
  const script = `require(${JSON.stringify(join(root, 'index.js'))}).runCli(${JSON.stringify(args)}).then((code) => { process.exitCode = code })`;
  return spawnSync(process.execPath, ['-e', script], { env: isolatedEnv(), encoding: 'utf8', timeout: 60_000, ...options });
}

function runBin(args, options = {}) {
  return spawnSync(process.execPath, [bin, ...args], { env: isolatedEnv(), encoding: 'utf8', timeout: 60_000, ...options });
}

describe('runCli', () => {
  test("runCli(['search','echo','--json']) resolves with the exit code and prints the bin's JSON", () => {
    const args = ['search', 'echo', '--json', '--config', demoConfig];
    const viaNode = runCliInNode(args);
    assert.equal(viaNode.status, 0, viaNode.stderr);
    const body = JSON.parse(viaNode.stdout);
    assert.deepEqual([body.results[0].server, body.results[0].tool], ['everything', 'echo']);
    const viaBin = runBin(args);
    assert.equal(viaBin.status, 0, viaBin.stderr);
    assert.equal(viaNode.stdout, viaBin.stdout);
  });

  test('exit codes come back: 2 for nothing found, 4 for a tool disabled by toolRules', () => {
    assert.equal(runCliInNode(['search', 'zzqqxx', '--config', demoConfig]).status, 2);
    const disabled = runCliInNode(['execute', 'filesystem', 'write_file', '--args', '{"path":"x","content":"y"}', '--config', demoConfig]);
    assert.equal(disabled.status, 4, disabled.stderr);
    assert.match(disabled.stderr, /Code: TOOL_DISABLED/);
  });

  test('--json gives one error document on stdout for a refused command line and a bad --args, through Node too', () => {
    const refused = runCliInNode(['list', '--bogus', '--json']);
    assert.equal(refused.status, 1);
    assert.equal(refused.stdout.trim().split('\n').length, 1, refused.stdout);
    assert.equal(JSON.parse(refused.stdout).error.code, 'VALIDATION_ERROR');
    assert.match(refused.stderr, /unexpected argument '--bogus'/);
    const badArgs = runBin(['execute', 'everything', 'echo', '--args', '{bad', '--json', '--config', demoConfig]);
    assert.equal(badArgs.status, 1, badArgs.stderr);
    const body = JSON.parse(badArgs.stdout);
    assert.equal(body.success, false);
    assert.equal(body.error.code, 'VALIDATION_ERROR');
  });

  test('--help --json describes the command line as JSON, and a bad --catalog is invalid input (1), through Node too', () => {
    const help = runCliInNode(['tools', '--help', '--json']);
    assert.equal(help.status, 0, help.stderr);
    const node = JSON.parse(help.stdout);
    assert.deepEqual(node.path, ['tools']);
    assert.deepEqual(node.arguments.map((a) => [a.name, a.required]), [['server', true]]);
    assert.ok(node.options.some((o) => o.long === '--all' && !o.global));
    const catalog = runCliInNode(['search', 'x', '--json', '--catalog', join(tempDir('anygpt-discovery-cli-catalog-'), 'missing.jsonl')]);
    assert.equal(catalog.status, 1, catalog.stderr);
    assert.equal(JSON.parse(catalog.stdout).error.code, 'VALIDATION_ERROR');
  });

  test("a tool result's escape sequences reach the terminal as plain text, and --json keeps them", () => {
    const message = 'a\u001b[2Jb\u001b]0;pwned\u0007c\rEVIL\u202efed';
    const args = JSON.stringify({ message });
    const human = runCliInNode(['execute', 'everything', 'echo', '--args', args, '--config', demoConfig]);
    assert.equal(human.status, 0, human.stderr);
    assert.match(human.stdout, /Echo: abc\nEVILfed/);
    assert.doesNotMatch(human.stdout, /[\u001b\u0007\u202e]|\r(?!\n)/);
    const json = runCliInNode(['execute', 'everything', 'echo', '--args', args, '--json', '--config', demoConfig]);
    assert.equal(JSON.parse(json.stdout).result.content[0].text, `Echo: ${message}`);
    assert.doesNotMatch(json.stdout, /[\u001b\u0007\u202e]/);
  });

  test('a TS config is evaluated for the commands, and a broken one is a configuration error (2)', () => {
    const dir = tempDir('anygpt-discovery-cli-ts-');
    mkdirSync(join(dir, '.anygpt'));
    writeFileSync(
      join(dir, '.anygpt', 'mcp-discovery.config.ts'),
      `const name: string = 'ev'\nexport default { discovery: { servers: [{ name, connection: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(serverPaths.everything)}] } }] } }\n`,
    );
    const file = join(dir, '.anygpt', 'mcp-discovery.config.ts');
    const env = isolatedEnv();
    allow(file, { cwd: dir, env });
    const listed = runBin(['list', '--json'], { cwd: dir, env });
    assert.equal(listed.status, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout).servers.map((s) => s.name), ['ev']);
    writeFileSync(file, "throw new Error('boom')\n");
    // Changed since approved: not evaluated until approved again.
    const unapproved = runBin(['list', '--json'], { cwd: dir, env });
    assert.equal(unapproved.status, 0, unapproved.stderr);
    assert.deepEqual(JSON.parse(unapproved.stdout).skipped.map((s) => [s.file, s.reason]), [[file, 'changed']]);
    allow(file, { cwd: dir, env });
    const broken = runBin(['list'], { cwd: dir, env });
    assert.equal(broken.status, 2);
    assert.match(broken.stderr, /cannot load config: boom/);
  });
});
