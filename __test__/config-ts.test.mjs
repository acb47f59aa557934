// anygpt.config.ts with defineConfig and a section beside `discovery`, through the bin and the
// Node API; and bad configs through the bin: the exact message, exit 1, the file untouched.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { createEngine, defineConfig } from '../index.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { allow, bin, call, isolatedEnv, root, serverPaths, tempDir } from './helpers.mjs';

// The engine runs in this process too: keep its snapshots and audit log out of the user's folders.
process.env.ANYGPT_DISCOVERY_CACHE_DIR = tempDir('anygpt-discovery-cache-');
process.env.ANYGPT_DISCOVERY_STATE_DIR = tempDir('anygpt-discovery-state-');

/** A project folder holding an `anygpt.config.ts` that serves the memory server as `notes`. */
function tsProject() {
  const project = tempDir('anygpt-discovery-ts-');
  const file = join(project, 'anygpt.config.ts');
  writeFileSync(
    file,
    `import { defineConfig } from ${JSON.stringify(join(root, 'index.js'))}

interface Providers { openai: { model: string } }
const providers: Providers = { openai: { model: 'gpt-5' } }

export default defineConfig({
  providers,
  hooks: { onStart: () => 'functions in other sections are fine' },
  discovery: {
    servers: [{ name: 'notes', connection: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(serverPaths.memory)}] } }],
    toolRules: [{ pattern: '*delete*', enabled: false }],
  },
} as any)
`,
  );
  return { project, file };
}

describe('anygpt.config.ts', () => {
  test('defineConfig returns its argument', () => {
    const config = { discovery: { servers: [] } };
    assert.equal(defineConfig(config), config);
  });

  test('loads through the bin (found by the search order in the project folder)', async () => {
    const { project, file } = tsProject();
    const home = tempDir('anygpt-discovery-home-');
    const env = isolatedEnv({ HOME: home });
    delete env.ANYGPT_DISCOVERY_CONFIG;
    // A project file: used once approved (see consent.test.mjs for before).
    allow(file, { cwd: project, env });
    const t = new StdioClientTransport({ command: process.execPath, args: [bin], cwd: project, env, stderr: 'pipe' });
    let log = '';
    t.stderr?.on('data', (c) => {
      log += c;
    });
    const c = new Client({ name: 'config-ts', version: '0.0.0' });
    await c.connect(t);
    try {
      const { body } = await call(c, 'list_mcp_servers');
      assert.deepEqual(body.servers.map((s) => s.name), ['notes'], log);
      assert.ok(log.includes(`config=${file}`), log);
      const { body: tools } = await call(c, 'list_tools', { server: 'notes' });
      assert.ok(!tools.tools.some((t) => t.name.includes('delete')), 'toolRules from the TS file apply');
    } finally {
      await c.close();
    }
  });

  describe('Node API', () => {
    const engines = [];
    after(async () => {
      for (const engine of engines) await engine.close();
    });

    test('createEngine({ config }) evaluates the TS file', async () => {
      const { file } = tsProject();
      const engine = await createEngine({ config: file });
      engines.push(engine);
      const servers = await engine.listServers();
      assert.deepEqual(servers.map((s) => s.name), ['notes']);
      assert.equal(engine.getConfig().discovery.providers, undefined);
    });

    test('createEngine() follows the search order from the working folder', async () => {
      const { project, file } = tsProject();
      const before = { cwd: process.cwd(), home: process.env.HOME };
      process.chdir(project);
      process.env.HOME = tempDir('anygpt-discovery-home-');
      try {
        allow(file, { cwd: project, env: process.env });
        const engine = await createEngine();
        engines.push(engine);
        assert.deepEqual((await engine.listServers()).map((s) => s.name), ['notes']);
      } finally {
        process.chdir(before.cwd);
        process.env.HOME = before.home;
      }
    });

    test('a TS file that throws is a CONFIGURATION_ERROR naming the file', async () => {
      const dir = tempDir('anygpt-discovery-ts-');
      const file = join(dir, 'mcp-discovery.config.ts');
      writeFileSync(file, "throw new Error('boom')\nexport default {}\n");
      await assert.rejects(createEngine({ config: file }), (error) => {
        assert.equal(error.code, 'CONFIGURATION_ERROR');
        assert.equal(error.message, `${file}: cannot load config: boom`);
        return true;
      });
    });
  });
});

describe('bad configs through the bin', () => {
  /** Run the bin on `text` saved as `name`; returns { status, stderr } and checks the file is unchanged. */
  function run(name, text) {
    const dir = tempDir('anygpt-discovery-bad-');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, name);
    writeFileSync(file, text);
    const result = spawnSync(process.execPath, [bin, '--config', file], {
      env: isolatedEnv(),
      input: '',
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(readFileSync(file, 'utf8'), text, 'the config file is never modified');
    assert.doesNotMatch(result.stderr, /panicked|RUST_BACKTRACE/);
    return { status: result.status, stderr: result.stderr, file };
  }

  for (const [what, name, text, message] of [
    [
      'unknown key with a suggestion',
      'c.json',
      '{ "discovery": { "servers": [ { "name": "a", "conection": {} } ] } }',
      'discovery.servers[0].conection: unknown key `conection` (did you mean `connection`?); remove it or use one of: name, description, connection, timeoutMs, startupTimeoutMs, idleTimeoutMs',
    ],
    [
      'wrong type in YAML',
      'c.yaml',
      'discovery:\n  cache:\n    ttl: soon\n',
      'discovery.cache.ttl: expected a whole number (0 or more), found the string "soon"',
    ],
    [
      'invalid regex with the rule index',
      'c.jsonc',
      '{ "discovery": { "toolRules": [ { "pattern": "*" }, { "pattern": ["*a*", "/(/"] }, ] } }',
      'discovery.toolRules[1].pattern[1]: invalid pattern `/(/`: ',
    ],
    [
      'a duplicate name',
      'c.json',
      '{ "discovery": { "servers": [ { "name": "a", "connection": { "command": "node" } }, { "name": "a", "connection": { "command": "node" } } ] } }',
      'discovery.servers[1].name: duplicate server name `a`: rename one (tools are addressed as `server:tool`)',
    ],
    [
      'JSON syntax, position given once',
      'c.json',
      '{ "discovery": { "servers": [ } }',
      'line 1 column 31: Unexpected close brace: fix the JSON syntax there',
    ],
  ]) {
    test(`${what}: exact message, exit 1`, () => {
      const { status, stderr, file } = run(name, text);
      assert.equal(status, 1, stderr);
      const expected = `error: ${file}: ${message.replace('@DIR@', join(file, '..'))}`;
      assert.ok(stderr.includes(expected), `expected\n${expected}\nin\n${stderr}`);
    });
  }

  test('an unset variable, a missing cwd and a command not on PATH are warnings naming server, place and fix', () => {
    const dir = tempDir('anygpt-discovery-warn-');
    const file = join(dir, 'c.json');
    writeFileSync(
      file,
      JSON.stringify({
        discovery: {
          servers: [{ name: 'gh', connection: { command: 'no-such-command-anygpt', cwd: 'missing-dir', env: { T: '${ANYGPT_UNSET_FOR_TEST}' } } }],
        },
      }),
    );
    const result = spawnSync(process.execPath, [bin, '--config', file], { env: isolatedEnv(), input: '', encoding: 'utf8', timeout: 30_000 });
    assert.equal(result.status, 0, result.stderr);
    assert.ok(
      result.stderr.includes(
        `WARN ${file}: discovery.servers[0].connection.env.T: server \`gh\` uses \`\${ANYGPT_UNSET_FOR_TEST}\`, which is not set: set it before starting, or write \`\${ANYGPT_UNSET_FOR_TEST:-default}\``,
      ),
      result.stderr,
    );
    assert.ok(
      result.stderr.includes(
        `WARN ${file}: discovery.servers[0].connection.cwd: folder \`${join(dir, 'missing-dir')}\` of server \`gh\` does not exist: create it or fix \`cwd\` (the server will fail to start)`,
      ),
      result.stderr,
    );
    assert.ok(
      result.stderr.includes(
        `WARN ${file}: discovery.servers[0].connection.command: \`no-such-command-anygpt\` of server \`gh\` is not on PATH: install it or write its full path (the server will fail to start)`,
      ),
      result.stderr,
    );
  });
});
