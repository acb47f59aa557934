// Zero-config and the search order, through the real bin with the official SDK client: a
// temporary HOME and project folder stand in for a user's machine.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { allow, bin, call, isolatedEnv, root, serverPaths, tempDir } from './helpers.mjs';

const fixtures = join(root, 'tests/fixtures/configs');

/** A temporary machine: `home` and `project` folders, nothing configured. */
function machine() {
  const dir = tempDir('anygpt-discovery-machine-');
  const home = join(dir, 'home');
  const project = join(dir, 'project');
  const state = join(dir, 'state');
  mkdirSync(home, { recursive: true });
  mkdirSync(project, { recursive: true });
  return { home, project, state };
}

/** Write `text` (an object is JSON) to `path`, creating folders. */
function put(path, text) {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, typeof text === 'string' ? text : JSON.stringify(text, null, 2));
  return path;
}

/** The environment of a user whose home is `home`: no config variable, no XDG override. */
function userEnv(home, more = {}) {
  const env = isolatedEnv({ HOME: home, USERPROFILE: home, ...more });
  delete env.XDG_CONFIG_HOME;
  delete env.APPDATA;
  if (!('ANYGPT_DISCOVERY_CONFIG' in more)) delete env.ANYGPT_DISCOVERY_CONFIG;
  return env;
}

/** Start the bin in `cwd` with `args` and connect the official client. */
async function gateway({ home, project, state }, args = [], more = {}) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bin, ...args],
    cwd: project,
    env: userEnv(home, { ANYGPT_DISCOVERY_STATE_DIR: state, ...more }),
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const client = new Client({ name: 'config-tests', version: '0.0.0' });
  await client.connect(transport);
  return { client, stderr: () => stderr, close: () => client.close() };
}

/** `anygpt-discovery allow path` on machine `m`. */
function approved(m, path) {
  allow(path, { cwd: m.project, env: userEnv(m.home, { ANYGPT_DISCOVERY_STATE_DIR: m.state }) });
}

function serverNames(body) {
  return body.servers.map((s) => s.name);
}

describe('zero-config', () => {
  test('a Claude Desktop config in HOME is served with no arguments: search and execute work', async () => {
    const m = machine();
    const claude = put(join(m.home, '.config/Claude/claude_desktop_config.json'), {
      mcpServers: {
        everything: { command: process.execPath, args: [serverPaths.everything] },
        'switched-off': { command: process.execPath, args: [serverPaths.memory], disabled: true },
        me: { command: 'npx', args: ['-y', '@anygpt/discovery'] },
      },
    });
    const g = await gateway(m);
    try {
      const { body: listed } = await call(g.client, 'list_mcp_servers');
      assert.deepEqual(serverNames(listed), ['everything']);
      assert.equal(listed.hint, undefined);
      const { body: found } = await call(g.client, 'search_tools', { query: 'echo' });
      assert.equal(`${found.results[0].server}:${found.results[0].tool}`, 'everything:echo');
      const result = await g.client.callTool({
        name: 'execute_tool',
        arguments: { server: 'everything', tool: 'echo', arguments: { message: 'from zero-config' } },
      });
      assert.match(result.content[0].text, /from zero-config/);
      const stderr = g.stderr();
      assert.match(stderr, /no config file \(looked at --config, \$ANYGPT_DISCOVERY_CONFIG, \.\/\.anygpt\/mcp-discovery\.config\.\{ts,mts,cts,js,mjs,cjs,json,jsonc,yaml,yml\}, \.\/anygpt\.config\.\{/);
      assert.ok(stderr.includes(`claude-desktop: ${claude}: \`switched-off\` skipped: disabled in that client`), stderr);
      assert.ok(stderr.includes(`claude-desktop: ${claude}: \`me\` skipped: it launches this gateway itself`), stderr);
      assert.ok(stderr.includes(`claude-desktop: ${claude}: 1 server (everything)`), stderr);
      assert.ok(stderr.includes(`windsurf: ${join(m.home, '.codeium/windsurf/mcp_config.json')}: not found`), stderr);
    } finally {
      await g.close();
    }
  });

  test('nothing configured: list_mcp_servers says in one line where servers go', async () => {
    const g = await gateway(machine());
    try {
      const { body } = await call(g.client, 'list_mcp_servers');
      assert.deepEqual(body, {
        servers: [],
        hint: "No servers configured: add them to ./.anygpt/mcp-discovery.config.json or any MCP client's config (Claude Desktop, Cursor, VS Code, ...), then restart.",
      });
    } finally {
      await g.close();
    }
  });

  test('--config with a client\'s own file reads it in that client\'s format', async () => {
    const m = machine();
    const file = put(join(m.project, 'zed-settings.json'), {
      context_servers: { memory: { command: { path: process.execPath, args: [serverPaths.memory] } } },
    });
    const g = await gateway(m, ['--config', file]);
    try {
      const { body } = await call(g.client, 'list_mcp_servers');
      assert.deepEqual(serverNames(body), ['memory']);
      assert.equal(body.servers[0].status, 'connected');
      assert.ok(g.stderr().includes(`${file}: read as a zed config`), g.stderr());
    } finally {
      await g.close();
    }
  });
});

describe('search order', () => {
  /** A config file at `path` serving one memory server called `name`. */
  function level(path, name) {
    const server = { name, connection: { command: process.execPath, args: [serverPaths.memory] } };
    if (path.endsWith('.ts')) {
      return put(path, `export default { other: { keep: true }, discovery: { servers: [${JSON.stringify(server)}] } }\n`);
    }
    if (path.endsWith('.yaml')) return put(path, `discovery:\n  servers:\n    - ${JSON.stringify(server)}\n`);
    return put(path, `// ${name}\n{ "discovery": { "servers": [${JSON.stringify(server)},], }, }\n`);
  }

  test('each level wins over the ones after it', async () => {
    const m = machine();
    const envFile = join(m.project, 'by-env.yaml');
    const flagFile = join(m.project, 'by-flag.json');
    // From the last level to the first: each new file must take over.
    const levels = [
      ['home-anygpt', () => level(join(m.home, 'anygpt.config.yaml'), 'home-anygpt')],
      ['home-own', () => level(join(m.home, '.anygpt/mcp-discovery.config.jsonc'), 'home-own')],
      // A project file wins once its user approved it (unapproved, see consent.test.mjs).
      ['project-anygpt', () => approved(m, level(join(m.project, 'anygpt.config.ts'), 'project-anygpt'))],
      ['project-own', () => approved(m, level(join(m.project, '.anygpt/mcp-discovery.config.json'), 'project-own'))],
      ['by-env', () => level(envFile, 'by-env'), [], { ANYGPT_DISCOVERY_CONFIG: envFile }],
      ['by-flag', () => level(flagFile, 'by-flag'), ['--config', flagFile], { ANYGPT_DISCOVERY_CONFIG: envFile }],
    ];
    for (const [expected, create, args = [], env = {}] of levels) {
      create();
      const g = await gateway(m, args, env);
      try {
        const { body } = await call(g.client, 'list_mcp_servers');
        assert.deepEqual(serverNames(body), [expected], g.stderr());
      } finally {
        await g.close();
      }
    }
  });
});
