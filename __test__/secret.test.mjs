// `secret set|list|delete` and `${secret:NAME}`: a value stored from stdin (never argv) reaches
// the server that names it, and appears nowhere else — not in the config, `config show`,
// stderr, the audit log or the gateway's answers. The store is the file fallback
// (ANYGPT_DISCOVERY_TOKEN_STORE=file, set by isolatedEnv): tests never touch the real keychain.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { bin, call, connect, isolatedEnv, serverPaths, writeConfig } from './helpers.mjs';

const VALUE = 'sk-test-9f3a1c77e2b64d0e8a5b';

function run(env, args, input) {
  return spawnSync(process.execPath, [bin, ...args], { env, input, encoding: 'utf8', timeout: 60_000 });
}

/** Every file under `dir`, recursively, with its text. */
function filesUnder(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(path));
    else out.push([path, readFileSync(path, 'utf8')]);
  }
  return out;
}

describe('secret set|list|delete and ${secret:NAME}', () => {
  test('a stored secret runs its server and is never shown', async () => {
    const env = isolatedEnv();
    const stored = run(env, ['secret', 'set', 'DEMO_KEY', '--stdin', '--json'], `${VALUE}\n`);
    assert.equal(stored.status, 0, stored.stderr);
    assert.deepEqual(JSON.parse(stored.stdout), { name: 'DEMO_KEY', keptIn: 'file' });
    const secretFiles = filesUnder(join(env.ANYGPT_DISCOVERY_STATE_DIR, 'secrets'));
    assert.equal(secretFiles.length, 1);
    assert.equal(statSync(secretFiles[0][0]).mode & 0o777, 0o600);

    const listed = run(env, ['secret', 'list', '--json']);
    assert.equal(listed.status, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout), { secrets: [{ name: 'DEMO_KEY', kept: 'file' }] });
    assert.ok(!listed.stdout.includes(VALUE));

    const config = writeConfig({
      discovery: {
        servers: [
          {
            name: 'everything',
            connection: { command: process.execPath, args: [serverPaths.everything, 'stdio'], env: { MY_KEY: '${secret:DEMO_KEY}' } },
          },
        ],
      },
    });
    assert.ok(!readFileSync(config, 'utf8').includes(VALUE));
    const shown = run(env, ['config', 'show', '--config', config]);
    assert.equal(shown.status, 0, shown.stderr);
    assert.match(shown.stdout, /\$\{secret:DEMO_KEY\}/);
    assert.ok(!shown.stdout.includes(VALUE) && !shown.stderr.includes(VALUE));

    const gateway = await connect(process.execPath, [bin, '--config', config, '--log-level', 'debug'], env);
    try {
      // The server got the value: its environment has MY_KEY, shown masked.
      const printed = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool: 'get-env', arguments: {} } });
      assert.notEqual(printed.isError, true, JSON.stringify(printed));
      const text = printed.content[0].text;
      assert.match(text, /"MY_KEY": "\*\*\*"/);
      assert.ok(!text.includes(VALUE));
      const echoed = await gateway.client.callTool({
        name: 'execute_tool',
        arguments: { server: 'everything', tool: 'echo', arguments: { message: `key ${VALUE}` } },
      });
      assert.deepEqual(echoed.content, [{ type: 'text', text: 'Echo: key ***' }]);
      const { body } = await call(gateway.client, 'list_mcp_servers');
      assert.ok(!JSON.stringify(body).includes(VALUE));
    } finally {
      await gateway.client.close();
    }
    assert.ok(!gateway.stderr().includes(VALUE), 'stderr never holds the value');
    for (const [path, text] of filesUnder(env.ANYGPT_DISCOVERY_STATE_DIR)) {
      if (path.includes(`${join(env.ANYGPT_DISCOVERY_STATE_DIR, 'secrets')}`)) continue;
      assert.ok(!text.includes(VALUE), `${path} holds the value`);
    }
    for (const [path, text] of filesUnder(env.ANYGPT_DISCOVERY_CACHE_DIR)) {
      assert.ok(!text.includes(VALUE), `${path} holds the value`);
    }

    assert.equal(run(env, ['secret', 'delete', 'DEMO_KEY']).status, 0);
    assert.equal(run(env, ['secret', 'delete', 'DEMO_KEY']).status, 2);
    const validated = run(env, ['config', 'validate', '--config', config]);
    assert.match(validated.stdout + validated.stderr, /secret:DEMO_KEY\}`, which is not stored: run `anygpt-discovery secret set DEMO_KEY`/);
  });

  test('the value is never taken from the command line, and a bad name or no terminal is a clear error (exit 1)', () => {
    const env = isolatedEnv();
    const onArgv = run(env, ['secret', 'set', 'DEMO_KEY', VALUE]);
    assert.equal(onArgv.status, 1);
    const noTerminal = run(env, ['secret', 'set', 'DEMO_KEY'], '');
    assert.equal(noTerminal.status, 1);
    assert.match(noTerminal.stderr, /no terminal to type the value on: pass --stdin/);
    const badName = run(env, ['secret', 'set', 'bad name', '--stdin'], VALUE);
    assert.equal(badName.status, 1);
    assert.match(badName.stderr, /use letters, digits/);
    const empty = run(env, ['secret', 'set', 'EMPTY', '--stdin'], '\n');
    assert.equal(empty.status, 1);
    assert.match(empty.stderr, /the value is empty/);
    assert.deepEqual(JSON.parse(run(env, ['secret', 'list', '--json']).stdout), { secrets: [] });
  });
});
