// `setup <client>` / `restore <client>` through the npm bin, for every client, each with a temp
// HOME (and project folder): the client's file ends up with one gateway entry and every other
// byte as it was; the gateway started as that entry (same HOME) serves every moved reference
// server to the official SDK client; restore gives the file back byte for byte; a second
// setup changes nothing; a malformed file is refused with its line, nothing written.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync, chmodSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { getEncoding } from 'js-tiktoken';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { bin, call, connect, demoFiles, isolatedEnv, serverPaths, tempDir } from './helpers.mjs';

/** One machine: a temp HOME, its config folder, a project folder, the gateway's own folders. */
function machine() {
  const env = isolatedEnv();
  const project = tempDir('anygpt-discovery-project-');
  return { env, home: env.HOME, config: env.XDG_CONFIG_HOME, project };
}

function run(m, args) {
  return spawnSync(process.execPath, [bin, ...args], { env: m.env, cwd: m.project, encoding: 'utf8', timeout: 120_000 });
}

/** The reference servers a client file lists, as its entries (JSON text, one per line). */
function referenceEntries(m) {
  const memoryFile = join(m.home, 'memory.jsonl');
  return {
    everything: { command: process.execPath, args: [serverPaths.everything, 'stdio'] },
    memory: { command: process.execPath, args: [serverPaths.memory], env: { MEMORY_FILE_PATH: memoryFile } },
    files: { command: process.execPath, args: [serverPaths.filesystem, demoFiles] },
  };
}

/**
 * A client's file: `head` + the servers object + `tail`, with comments in all three parts.
 * `extra` are entries that must stay in the client (name → [entry, why]).
 */
function clientText(m, { key, nested = false, extra = {}, zedOld = false }) {
  const entries = referenceEntries(m);
  if (zedOld) {
    // Older Zed: `command` is an object { path, args, env }.
    const { command, args } = entries.everything;
    entries.everything = { command: { path: command, args } };
  }
  const lines = Object.entries({ ...entries, ...Object.fromEntries(Object.entries(extra).map(([k, [v]]) => [k, v])) })
    .map(([name, entry], i) => `    ${JSON.stringify(name)}: ${JSON.stringify(entry)}${i === 0 ? ', // the first one' : ','}`);
  const block = `{\n    // servers of mine\n${lines.join('\n')}\n  }`;
  const head = nested
    ? `// my settings\n{\n  "editor.fontSize": 14, /* keep me */\n  "mcp": {\n  "servers": `
    : `// my settings\n{\n  "theme": "dark", /* keep me */\n  "numbers": [1, 2,],\n  ${JSON.stringify(key)}: `;
  const tail = nested ? `\n  },\n  "zzz": true,\n}\n` : `,\n  "after": { "x": "y" }, // trailing\n}\n`;
  return { head, tail, text: head + block + tail };
}

const CLIENTS = [
  { client: 'claude-desktop', file: (m) => join(m.config, 'Claude/claude_desktop_config.json'), key: 'mcpServers' },
  { client: 'claude-code', file: (m) => join(m.home, '.claude.json'), key: 'mcpServers' },
  { client: 'claude-code', project: true, file: (m) => join(m.project, '.mcp.json'), key: 'mcpServers' },
  { client: 'cursor', file: (m) => join(m.home, '.cursor/mcp.json'), key: 'mcpServers' },
  { client: 'cursor', project: true, file: (m) => join(m.project, '.cursor/mcp.json'), key: 'mcpServers' },
  {
    client: 'vscode',
    file: (m) => join(m.config, 'Code/User/mcp.json'),
    key: 'servers',
    extra: { asks: [{ command: 'x', env: { TOKEN: '${input:token}' } }, /VS Code prompt/] },
  },
  { client: 'vscode', project: true, file: (m) => join(m.project, '.vscode/mcp.json'), key: 'servers' },
  { client: 'vscode', nested: true, file: (m) => join(m.config, 'Code/User/settings.json'), key: 'servers' },
  { client: 'windsurf', file: (m) => join(m.home, '.codeium/windsurf/mcp_config.json'), key: 'mcpServers' },
  { client: 'zed', file: (m) => join(m.config, 'zed/settings.json'), key: 'context_servers', zedOld: true },
];

/** Search and execute each reference server through the gateway the client's entry starts. */
async function gatewayServesEveryServer(m, entry) {
  // The entry runs `npx -y @anygpt/discovery [args]`: this checkout's bin stands for the package.
  assert.equal(entry.command, 'npx');
  const at = entry.args.indexOf('@anygpt/discovery');
  assert.ok(at >= 0, JSON.stringify(entry));
  const gateway = await connect(process.execPath, [bin, ...entry.args.slice(at + 1)], { ...m.env });
  try {
    const { body: servers } = await call(gateway.client, 'list_mcp_servers');
    assert.deepEqual(servers.servers.map((s) => s.name).sort(), ['everything', 'files', 'memory']);
    const { body: found } = await call(gateway.client, 'search_tools', { query: 'echo' });
    assert.deepEqual([found.results[0].server, found.results[0].tool], ['everything', 'echo']);
    const echo = await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'everything', tool: 'echo', arguments: { message: 'via setup' } },
    });
    assert.deepEqual(echo.content, [{ type: 'text', text: 'Echo: via setup' }]);
    const graph = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'memory', tool: 'read_graph', arguments: {} } });
    assert.notEqual(graph.isError, true, JSON.stringify(graph));
    const file = await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'files', tool: 'read_text_file', arguments: { path: join(demoFiles, 'hello.txt') } },
    });
    assert.match(file.content[0].text, /Hello from the @anygpt\/discovery demo/);
  } finally {
    await gateway.client.close();
  }
}

function stateFiles(m) {
  const dir = join(m.env.ANYGPT_DISCOVERY_STATE_DIR, 'setup');
  return existsSync(dir) ? readdirSync(dir) : [];
}

describe('setup and restore, every client', () => {
  for (const spec of CLIENTS) {
    const label = `${spec.client}${spec.project ? ' --project' : ''}${spec.nested ? ' (settings.json)' : ''}`;
    test(`${label}: one gateway entry, other bytes kept, the gateway serves every server, restore is byte-identical, twice is a no-op`, async () => {
      const m = machine();
      const file = spec.file(m);
      mkdirSync(dirname(file), { recursive: true });
      const { head, tail, text } = clientText(m, spec);
      writeFileSync(file, text, { mode: 0o640 });
      chmodSync(file, 0o640);
      const scope = spec.project ? ['--project'] : [];

      const done = run(m, ['setup', spec.client, ...scope, '--yes', '--json']);
      assert.equal(done.status, 0, done.stderr + done.stdout);
      const report = JSON.parse(done.stdout);
      assert.equal(report.applied, true);
      assert.deepEqual(report.moved.map((s) => s.name).sort(), ['everything', 'files', 'memory']);
      for (const [name, [, why]] of Object.entries(spec.extra ?? {})) {
        assert.match(report.kept.find((k) => k.name === name).reason, why);
      }

      const after = readFileSync(file, 'utf8');
      assert.ok(after.startsWith(head), `bytes before the servers object changed:\n${after}`);
      assert.ok(after.endsWith(tail), `bytes after the servers object changed:\n${after}`);
      assert.equal(statSync(file).mode & 0o777, 0o640, 'the client file keeps its mode');
      const servers = spec.nested ? JSON.parse(stripComments(after)).mcp.servers : JSON.parse(stripComments(after))[spec.key];
      const names = Object.keys(servers);
      assert.deepEqual(names, [...Object.keys(spec.extra ?? {}), 'anygpt-discovery']);
      const config = join(m.home, '.anygpt/mcp-discovery.config.json');
      assert.equal(statSync(config).mode & 0o777, 0o600);
      await gatewayServesEveryServer(m, servers['anygpt-discovery']);

      const again = run(m, ['setup', spec.client, ...scope, '--yes', '--json']);
      assert.equal(again.status, 0, again.stderr);
      assert.equal(JSON.parse(again.stdout).applied, false);
      assert.equal(readFileSync(file, 'utf8'), after, 'a second setup changes nothing');

      const restored = run(m, ['restore', spec.client, ...scope]);
      assert.equal(restored.status, 0, restored.stderr);
      assert.equal(readFileSync(file, 'utf8'), text, 'restore gives the file back byte for byte');
      assert.equal(statSync(file).mode & 0o777, 0o640);
    });
  }
});

describe('the running client', () => {
  test('is told to restart when it runs, on setup and on restore', { skip: process.platform !== 'linux' && 'reads /proc' }, async () => {
    const m = machine();
    const file = join(m.home, '.cursor/mcp.json');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify({ mcpServers: { memory: referenceEntries(m).memory } }));
    const quiet = run(m, ['setup', 'cursor', '--yes']);
    assert.equal(quiet.status, 0, quiet.stderr);
    assert.match(quiet.stdout + quiet.stderr, /cursor is not running: the next time it starts, it starts the gateway instead/);
    assert.equal(run(m, ['restore', 'cursor']).status, 0);
    // A process whose executable is named as Cursor's.
    const cursor = join(m.project, 'cursor');
    symlinkSync('/bin/sleep', cursor);
    const running = spawn(cursor, ['60'], { stdio: 'ignore' });
    try {
      const done = run(m, ['setup', 'cursor', '--yes']);
      assert.equal(done.status, 0, done.stderr);
      assert.match(done.stdout + done.stderr, /cursor is running: restart it so it starts the gateway instead/);
      const restored = run(m, ['restore', 'cursor']);
      assert.match(restored.stdout + restored.stderr, /cursor is running: restart it so it starts its own servers again/);
    } finally {
      running.kill();
    }
  });
});

describe('setup refuses and reports', () => {
  test('a malformed client file is refused with file, line and fix; nothing is written', () => {
    const m = machine();
    const file = join(m.config, 'Claude/claude_desktop_config.json');
    mkdirSync(dirname(file), { recursive: true });
    const text = '{\n  "mcpServers": {\n    "a": { "command": "x" },\n    "b": }\n  }\n}\n';
    writeFileSync(file, text);
    const refused = run(m, ['setup', 'claude-desktop', '--yes']);
    assert.equal(refused.status, 2, refused.stderr);
    assert.match(refused.stderr, new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: line 4 column \\d+: .*fix the JSON syntax there`));
    assert.match(refused.stderr, /nothing was written/);
    assert.equal(readFileSync(file, 'utf8'), text);
    assert.ok(!existsSync(join(m.home, '.anygpt')), 'no gateway config was created');
    assert.deepEqual(stateFiles(m), [], 'no backup was made');
  });

  test('without a terminal or --yes nothing is written (exit 1); --dry-run prints the plan and a diff only', () => {
    const m = machine();
    const file = join(m.home, '.cursor/mcp.json');
    mkdirSync(dirname(file), { recursive: true });
    const text = JSON.stringify({ mcpServers: referenceEntries(m) }, null, 2);
    writeFileSync(file, text);
    const asked = run(m, ['setup', 'cursor']);
    assert.equal(asked.status, 1, asked.stderr);
    assert.match(asked.stderr, /--yes/);
    const dry = run(m, ['setup', 'cursor', '--dry-run']);
    assert.equal(dry.status, 0, dry.stderr);
    assert.match(dry.stdout, /move behind the gateway \(3\): everything, memory, files/);
    assert.match(dry.stdout, /^-    "everything": \{$/m);
    assert.match(dry.stdout, /^\+    "anygpt-discovery": \{$/m);
    assert.equal(readFileSync(file, 'utf8'), text);
    assert.ok(!existsSync(join(m.home, '.anygpt')));
    assert.deepEqual(stateFiles(m), []);
  });

  test('restore refuses a file changed since setup unless --force, which keeps the changed text', () => {
    const m = machine();
    const file = join(m.home, '.codeium/windsurf/mcp_config.json');
    mkdirSync(dirname(file), { recursive: true });
    const text = JSON.stringify({ mcpServers: { memory: referenceEntries(m).memory } });
    writeFileSync(file, text);
    assert.equal(run(m, ['setup', 'windsurf', '--yes']).status, 0);
    const edited = readFileSync(file, 'utf8').replace('{', '{"added": 1, ');
    writeFileSync(file, edited);
    const refused = run(m, ['restore', 'windsurf', '--json']);
    assert.equal(refused.status, 2);
    assert.match(JSON.parse(refused.stdout).error.message, /changed since setup.*--force/);
    assert.equal(readFileSync(file, 'utf8'), edited);
    const forced = run(m, ['restore', 'windsurf', '--force', '--json']);
    assert.equal(forced.status, 0, forced.stderr);
    assert.equal(readFileSync(file, 'utf8'), text);
    assert.equal(readFileSync(JSON.parse(forced.stdout).replacedKeptAt, 'utf8'), edited);
    assert.equal(run(m, ['restore', 'windsurf']).status, 2, 'nothing left to restore');
  });

  test('a TS gateway config is not edited: the exact snippet is printed and nothing changes', () => {
    const m = machine();
    mkdirSync(join(m.home, '.anygpt'), { recursive: true });
    const ts = join(m.home, '.anygpt/mcp-discovery.config.ts');
    writeFileSync(ts, 'export default { discovery: { servers: [] } };\n');
    const file = join(m.config, 'Claude/claude_desktop_config.json');
    mkdirSync(dirname(file), { recursive: true });
    const text = JSON.stringify({ mcpServers: { memory: referenceEntries(m).memory } });
    writeFileSync(file, text);
    const out = run(m, ['setup', 'claude-desktop', '--yes', '--json']);
    assert.equal(out.status, 0, out.stderr);
    const report = JSON.parse(out.stdout);
    assert.equal(report.configAction, 'snippet');
    assert.equal(report.applied, false);
    assert.deepEqual(JSON.parse(report.snippet).map((s) => s.name), ['memory']);
    assert.equal(readFileSync(file, 'utf8'), text);
    assert.equal(readFileSync(ts, 'utf8'), 'export default { discovery: { servers: [] } };\n');
  });
});

describe('setup moves plain-text keys into the keychain', () => {
  const KEY = 'sk-live-4f1e9a0c3b7d52e8aa61';

  test('an env key becomes ${secret:NAME}: stored (file store in tests), absent from the config, and the server still gets it', async () => {
    const m = machine();
    const file = join(m.home, '.cursor/mcp.json');
    mkdirSync(dirname(file), { recursive: true });
    const everything = { command: process.execPath, args: [serverPaths.everything, 'stdio'], env: { API_KEY: KEY, MODE: 'demo' } };
    writeFileSync(file, JSON.stringify({ mcpServers: { everything } }, null, 2));
    const done = run(m, ['setup', 'cursor', '--yes', '--json']);
    assert.equal(done.status, 0, done.stderr);
    const report = JSON.parse(done.stdout);
    assert.deepEqual(report.keys, [{ server: 'everything', field: 'env.API_KEY', secret: 'EVERYTHING_API_KEY' }]);
    assert.equal(report.savings.estimated, false, 'measured with the key, before it was stored');
    assert.ok(!done.stdout.includes(KEY) && !done.stderr.includes(KEY));
    const config = readFileSync(join(m.home, '.anygpt/mcp-discovery.config.json'), 'utf8');
    assert.ok(!config.includes(KEY), config);
    const env = JSON.parse(config).discovery.servers[0].connection.env;
    assert.deepEqual(env, { API_KEY: '${secret:EVERYTHING_API_KEY}', MODE: 'demo' });
    const listed = JSON.parse(run(m, ['secret', 'list', '--json']).stdout);
    assert.deepEqual(listed.secrets.map((s) => s.name), ['EVERYTHING_API_KEY']);
    const entry = JSON.parse(readFileSync(file, 'utf8')).mcpServers['anygpt-discovery'];
    const gateway = await connect(process.execPath, [bin, ...entry.args.slice(2)], { ...m.env });
    try {
      const printed = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool: 'get-env', arguments: {} } });
      assert.match(printed.content[0].text, /"API_KEY": "\*\*\*"/);
      assert.ok(!printed.content[0].text.includes(KEY));
    } finally {
      await gateway.client.close();
    }
  });

  test('--keep-keys leaves them as they were', () => {
    const m = machine();
    const file = join(m.home, '.cursor/mcp.json');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify({ mcpServers: { memory: { ...referenceEntries(m).memory, env: { API_KEY: KEY } } } }));
    const dry = run(m, ['setup', 'cursor', '--dry-run', '--keep-keys']);
    assert.match(dry.stdout, /"API_KEY": "\*\*\*"/, 'the diff masks the key');
    assert.ok(!dry.stdout.includes(KEY));
    const done = run(m, ['setup', 'cursor', '--yes', '--keep-keys', '--json']);
    assert.equal(done.status, 0, done.stderr);
    assert.ok(!done.stdout.includes(KEY), 'the JSON report masks the key');
    assert.deepEqual(JSON.parse(done.stdout).keys, []);
    const config = JSON.parse(readFileSync(join(m.home, '.anygpt/mcp-discovery.config.json'), 'utf8'));
    assert.equal(config.discovery.servers[0].connection.env.API_KEY, KEY);
    assert.deepEqual(JSON.parse(run(m, ['secret', 'list', '--json']).stdout).secrets, []);
  });
});

describe('the savings line', () => {
  test("matches js-tiktoken o200k of the moved servers' real tools/list within 2 %", async () => {
    const m = machine();
    const file = join(m.config, 'Claude/claude_desktop_config.json');
    mkdirSync(dirname(file), { recursive: true });
    const entries = referenceEntries(m);
    writeFileSync(file, JSON.stringify({ mcpServers: entries }, null, 2));
    const out = run(m, ['setup', 'claude-desktop', '--dry-run', '--json']);
    assert.equal(out.status, 0, out.stderr);
    const { savings } = JSON.parse(out.stdout);
    assert.equal(savings.estimated, false);
    const encoding = getEncoding('o200k_base');
    let tools = 0;
    let tokens = 0;
    for (const entry of Object.values(entries)) {
      // A client that answers sampling and elicitation, as the gateway's does (server-everything
      // lists more tools to such a client).
      const client = new Client({ name: 'savings-check', version: '0.0.0' }, { capabilities: { sampling: {}, elicitation: { form: {} } } });
      await client.connect(new StdioClientTransport({ command: entry.command, args: entry.args, env: { ...m.env, ...entry.env }, stderr: 'ignore' }));
      try {
        const listed = (await client.listTools()).tools;
        tools += listed.length;
        tokens += encoding.encode(JSON.stringify(listed)).length;
      } finally {
        await client.close();
      }
    }
    assert.equal(savings.toolsBefore, tools);
    // Fields the gateway's MCP library (rmcp 3.11) does not model, as `execution` (MCP
    // 2025-11-25, about 4 % of these lists), are counted too: the client would load them.
    assert.ok(Math.abs(savings.tokensBefore - tokens) / tokens < 0.02, `${savings.tokensBefore} vs ${tokens}`);
    assert.equal(savings.toolsAfter, 5);
    const human = run(m, ['setup', 'claude-desktop', '--dry-run']);
    assert.match(human.stdout, new RegExp(`${tools} tools, ${savings.tokensBefore} o200k tokens before; 5 tools, ${savings.tokensAfter} tokens after`));
  });
});

/** JSONC → JSON for reading a result back (comments and trailing commas out). */
function stripComments(text) {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:"])\/\/.*$/gm, '$1')
    .replace(/,(\s*[}\]])/g, '$1');
}
