// The gateway end to end: the npm bin on the demo config (real reference servers), driven by
// the official MCP SDK client over stdio.
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { getEncoding } from 'js-tiktoken';
import {
  alive, call, connect, demoConfig, demoFiles, descendants, referenceServer, serverPaths, spawnGateway,
  startGateway, tempDir, waitFor, writeConfig,
} from './helpers.mjs';

const META_TOOLS = ['list_mcp_servers', 'search_tools', 'list_tools', 'get_tool_details', 'execute_tool'];

describe('gateway on the demo config', () => {
  let gateway;
  before(async () => {
    gateway = await startGateway(demoConfig);
  });
  after(async () => {
    await gateway.client.close();
  });

  test('serves exactly the five meta-tools', async () => {
    const { tools } = await gateway.client.listTools();
    assert.deepEqual(tools.map((t) => t.name), META_TOOLS);
  });

  test('tools/list stays within 400 o200k tokens', async () => {
    const { tools } = await gateway.client.listTools();
    const tokens = getEncoding('o200k_base').encode(JSON.stringify(tools)).length;
    assert.ok(tokens <= 400, `tools/list is ${tokens} tokens`);
  });

  test('lists the three demo servers as connected with tool counts', async () => {
    const { body } = await call(gateway.client, 'list_mcp_servers');
    assert.deepEqual(body.servers.map((s) => [s.name, s.status]), [
      ['everything', 'connected'], ['filesystem', 'connected'], ['memory', 'connected'],
    ]);
    const filesystem = body.servers.find((s) => s.name === 'filesystem');
    assert.ok(filesystem.toolCount > filesystem.enabledCount, 'demo rules disable filesystem writes');
  });

  test('search "echo" ranks everything:echo first', async () => {
    const { result, body } = await call(gateway.client, 'search_tools', { query: 'echo' });
    assert.equal(result.isError, false);
    assert.deepEqual([body.results[0].server, body.results[0].tool], ['everything', 'echo']);
    assert.equal(body.results[0].relevance, 1);
  });

  test('search answers are compact: summaries, no schemas, no nulls', async () => {
    const { result, body } = await call(gateway.client, 'search_tools', { query: 'read a file', limit: 5 });
    const text = result.content[0].text;
    assert.ok(body.results.length > 0 && body.results.length <= 5);
    assert.ok(!text.includes('inputSchema') && !text.includes('null') && !text.includes('\n'));
    for (const hit of body.results) {
      assert.ok(hit.summary.length <= 120);
      assert.ok(hit.relevance >= 0 && hit.relevance <= 1);
    }
  });

  test('get_tool_details returns the inputSchema server-everything itself reports', async () => {
    const direct = await connect(process.execPath, [serverPaths.everything, 'stdio']);
    try {
      const { tools } = await direct.client.listTools();
      const echo = tools.find((t) => t.name === 'echo');
      const { body } = await call(gateway.client, 'get_tool_details', { server: 'everything', tool: 'echo' });
      assert.deepEqual(body.inputSchema, echo.inputSchema);
      assert.equal(body.description, echo.description);
    } finally {
      await direct.client.close();
    }
  });

  test('execute_tool echo round-trips the message, result passed through unchanged', async () => {
    const result = await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'everything', tool: 'echo', arguments: { message: 'hello gateway' } },
    });
    assert.deepEqual(result.content, [{ type: 'text', text: 'Echo: hello gateway' }]);
  });

  test('execute_tool reads a file through the filesystem server', async () => {
    const result = await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'filesystem', tool: 'read_text_file', arguments: { path: join(demoFiles, 'hello.txt') } },
    });
    assert.notEqual(result.isError, true);
    assert.match(result.content[0].text, /Hello from the @anygpt\/discovery demo/);
  });

  test('unknown tool answers TOOL_NOT_FOUND with suggestions', async () => {
    const { result, body } = await call(gateway.client, 'execute_tool', { server: 'everything', tool: 'ecko', arguments: {} });
    assert.equal(result.isError, true);
    assert.equal(body.error.code, 'TOOL_NOT_FOUND');
    assert.ok(body.error.suggestions.includes('everything:echo'), JSON.stringify(body));
  });

  test('unknown server answers SERVER_NOT_FOUND with suggestions', async () => {
    const { result, body } = await call(gateway.client, 'list_tools', { server: 'filesystm' });
    assert.equal(result.isError, true);
    assert.equal(body.error.code, 'SERVER_NOT_FOUND');
    assert.deepEqual(body.error.suggestions, ['filesystem']);
  });

  test('list_tools hides disabled tools unless asked', async () => {
    const { body: enabled } = await call(gateway.client, 'list_tools', { server: 'filesystem' });
    assert.ok(!enabled.tools.some((t) => t.name === 'write_file'));
    const { body: all } = await call(gateway.client, 'list_tools', { server: 'filesystem', includeDisabled: true });
    const write = all.tools.find((t) => t.name === 'write_file');
    assert.deepEqual([write.enabled, write.tags], [false, ['writes']]);
  });

  test('malformed meta-tool arguments are VALIDATION_ERROR results naming the field (SEP-1303)', async () => {
    for (const [name, args, field] of [
      ['search_tools', { query: 42 }, /`query`: invalid type: integer `42`, expected a string/],
      ['execute_tool', { server: 'everything', tool: 'echo', args: {} }, /unknown field `args`/],
      ['get_tool_details', { server: 'everything' }, /missing field `tool`/],
    ]) {
      const { result, body } = await call(gateway.client, name, args);
      assert.equal(result.isError, true, name);
      assert.deepEqual(Object.keys(body.error), ['code', 'message']);
      assert.equal(body.error.code, 'VALIDATION_ERROR');
      assert.match(body.error.message, field);
    }
  });

  test('an unknown meta-tool name stays JSON-RPC -32602', async () => {
    await assert.rejects(
      gateway.client.callTool({ name: 'no_such_meta_tool', arguments: {} }),
      (error) => error.code === -32602 && /no_such_meta_tool/.test(error.message),
    );
  });
});

describe('gateway with rules and faults', () => {
  test('a disabled tool answers TOOL_DISABLED and never reaches the server', async () => {
    const dir = tempDir();
    const config = writeConfig({
      discovery: {
        servers: [referenceServer('filesystem', [dir])],
        toolRules: [{ pattern: ['write_file'], enabled: false }],
      },
    }, dir);
    const gateway = await startGateway(config);
    try {
      const target = join(dir, 'must-not-exist.txt');
      const { result, body } = await call(gateway.client, 'execute_tool', {
        server: 'filesystem', tool: 'write_file', arguments: { path: target, content: 'x' },
      });
      assert.equal(result.isError, true);
      assert.equal(body.error.code, 'TOOL_DISABLED');
      assert.equal(existsSync(target), false, 'the filesystem server must not have run write_file');
      // The same server still runs enabled tools.
      const created = await gateway.client.callTool({
        name: 'execute_tool',
        arguments: { server: 'filesystem', tool: 'create_directory', arguments: { path: join(dir, 'made') } },
      });
      assert.notEqual(created.isError, true);
      assert.equal(existsSync(join(dir, 'made')), true);
    } finally {
      await gateway.client.close();
    }
  });

  test('a server whose command does not exist is `error`; the others keep working', async () => {
    const config = writeConfig({
      discovery: {
        servers: [
          { name: 'broken', connection: { command: 'definitely-not-a-command-anygpt' } },
          referenceServer('everything', ['stdio']),
        ],
      },
    });
    const gateway = await startGateway(config);
    try {
      const { body } = await call(gateway.client, 'list_mcp_servers');
      const broken = body.servers.find((s) => s.name === 'broken');
      assert.equal(broken.status, 'error');
      assert.match(broken.error, /definitely-not-a-command-anygpt/);
      assert.equal(body.servers.find((s) => s.name === 'everything').status, 'connected');
      const echo = await gateway.client.callTool({
        name: 'execute_tool', arguments: { server: 'everything', tool: 'echo', arguments: { message: 'still here' } },
      });
      assert.equal(echo.content[0].text, 'Echo: still here');
      const { body: failed } = await call(gateway.client, 'list_tools', { server: 'broken' });
      assert.equal(failed.error.code, 'SERVER_CONNECTION_ERROR');
    } finally {
      await gateway.client.close();
    }
  });

  test('a server that never answers initialize times out as `error`', async () => {
    // `node -e` with a timer: a process that runs but never speaks MCP.
    const config = writeConfig({
      discovery: {
        servers: [
          { name: 'silent', startupTimeoutMs: 500, connection: { command: process.execPath, args: ['-e', 'setTimeout(() => {}, 60000)'] } },
          referenceServer('everything', ['stdio']),
        ],
      },
    });
    const gateway = await startGateway(config);
    try {
      const { body } = await call(gateway.client, 'list_mcp_servers');
      const silent = body.servers.find((s) => s.name === 'silent');
      assert.equal(silent.status, 'error');
      assert.match(silent.error, /500 ms/);
      const { body: search } = await call(gateway.client, 'search_tools', { query: 'echo' });
      assert.equal(search.results[0].tool, 'echo');
    } finally {
      await gateway.client.close();
    }
  });

  test('an unset ${VAR} is an error naming the variable, other servers unaffected', async () => {
    const config = writeConfig({
      discovery: {
        servers: [
          { name: 'needs-token', connection: { command: process.execPath, env: { TOKEN: '${ANYGPT_TEST_UNSET_VAR}' } } },
          referenceServer('everything', ['stdio']),
        ],
      },
    });
    const gateway = await startGateway(config);
    try {
      const { body } = await call(gateway.client, 'list_mcp_servers');
      const server = body.servers.find((s) => s.name === 'needs-token');
      assert.equal(server.status, 'error');
      assert.match(server.error, /ANYGPT_TEST_UNSET_VAR/);
    } finally {
      await gateway.client.close();
    }
  });

  test('a TS config file is loaded by the bin', async () => {
    const dir = tempDir();
    const file = join(dir, 'anygpt.config.ts');
    const everything = JSON.stringify(serverPaths.everything);
    writeFileSync(file, `
      type Rule = { pattern: string[]; enabled: boolean };
      const rules: Rule[] = [{ pattern: ['echo'], enabled: false }];
      export default {
        providers: { ignored: true },
        discovery: { servers: [{ name: 'ev', connection: { command: ${JSON.stringify(process.execPath)}, args: [${everything}, 'stdio'] } }], toolRules: rules },
      };
    `);
    const gateway = await startGateway(file);
    try {
      const { body } = await call(gateway.client, 'execute_tool', { server: 'ev', tool: 'echo', arguments: { message: 'x' } });
      assert.equal(body.error.code, 'TOOL_DISABLED');
    } finally {
      await gateway.client.close();
    }
  });
});

describe('gateway configuration errors', () => {
  test('a bad rule exits 1 naming file, path and reason', async () => {
    const config = writeConfig({ discovery: { toolRules: [{ pattern: ['ok'] }, { pattern: ['*x*', '/(unclosed/'] }] } });
    const { spawnSync } = await import('node:child_process');
    const run = spawnSync(process.execPath, [join(import.meta.dirname, '..', 'bin/anygpt-discovery.js'), '--config', config], {
      encoding: 'utf8', input: '',
    });
    assert.equal(run.status, 1);
    assert.equal(run.stdout, '', 'nothing may reach stdout, the MCP channel');
    assert.match(run.stderr, /config\.json: discovery\.toolRules\[1\]\.pattern\[1\]: invalid pattern `\/\(unclosed\/`/);
  });
});

describe('gateway lifecycle', () => {
  for (const [how, stop] of [
    ['SIGTERM', (child) => child.kill('SIGTERM')],
    ['SIGINT', (child) => child.kill('SIGINT')],
    ['stdin EOF', (child) => child.stdin.end()],
  ]) {
    test(`${how}: exits 0 and leaves no child process`, async () => {
      const gateway = await spawnGateway(['--config', demoConfig]);
      const { body } = await call(gateway.client, 'list_mcp_servers');
      assert.ok(body.servers.every((s) => s.status === 'connected'));
      const children = descendants(gateway.child.pid);
      assert.ok(children.length >= 3, `expected the three servers as children, found ${children}`);
      stop(gateway.child);
      assert.equal(await gateway.exit, 0, gateway.stderr());
      const left = await waitFor(() => children.filter(alive).length === 0 && [], 2000);
      assert.deepEqual(children.filter(alive), [], `still running after exit: ${left}`);
    });
  }
});
