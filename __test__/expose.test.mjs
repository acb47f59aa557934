// Tools shown directly (`discovery.expose`): the npm bin serving server-everything and
// server-memory, driven by the official client. An exposed tool is listed beside the five with
// its real schema, runs exactly as through execute_tool (same result, same audit line), a
// disabled or negated tool is never shown, the context cost is reported in o200k tokens, and a
// reload that changes the set sends tools/list_changed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { getEncoding } from 'js-tiktoken';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { bin, call, isolatedEnv, referenceServer, startGateway, tempDir, waitFor, writeConfig } from './helpers.mjs';

const META_TOOLS = ['list_mcp_servers', 'search_tools', 'list_tools', 'get_tool_details', 'execute_tool'];

function configOf(expose) {
  return {
    discovery: {
      servers: [referenceServer('everything', ['stdio']), referenceServer('memory')],
      toolRules: [{ server: 'everything', pattern: 'get-sum', enabled: false }],
      expose,
    },
  };
}

describe('tools shown directly', () => {
  let gateway;
  let configPath;
  const stateDir = tempDir('anygpt-discovery-state-');
  const cacheDir = tempDir('anygpt-discovery-cache-');
  const auditLines = () => readFileSync(join(stateDir, 'audit.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));

  before(async () => {
    configPath = writeConfig(
      configOf(['!memory:delete_*', 'everything:echo', 'everything:get-sum', 'memory:*_entities']),
    );
    gateway = await startGateway(configPath, { ANYGPT_DISCOVERY_STATE_DIR: stateDir, ANYGPT_DISCOVERY_CACHE_DIR: cacheDir });
    // Both servers' tools are known once list_mcp_servers answers (it waits for first starts).
    await call(gateway.client, 'list_mcp_servers');
  });
  after(async () => {
    await gateway?.client.close();
  });

  test('tools/list: the five, then each exposed tool as <server>__<tool> with its real schema', async () => {
    const { tools } = await gateway.client.listTools();
    assert.deepEqual(tools.map((t) => t.name), [...META_TOOLS, 'everything__echo', 'memory__create_entities']);
    for (const tool of tools) assert.match(tool.name, /^[A-Za-z0-9_-]{1,64}$/);
    const echo = tools.find((t) => t.name === 'everything__echo');
    const { body: details } = await call(gateway.client, 'get_tool_details', { server: 'everything', tool: 'echo' });
    assert.deepEqual(echo.inputSchema, details.inputSchema);
    assert.equal(echo.description, details.description);
    assert.ok(gateway.client.getServerCapabilities().tools.listChanged, 'tools.listChanged is declared');
  });

  test('a disabled tool matching expose is not shown, nor one a negation hides', async () => {
    const names = (await gateway.client.listTools()).tools.map((t) => t.name);
    assert.ok(!names.some((n) => n.includes('get-sum')), names.join(', '));
    assert.ok(!names.includes('memory__delete_entities'), names.join(', '));
  });

  test('called directly and through execute_tool: the same result and the same audit line', async () => {
    const direct = await gateway.client.callTool({ name: 'everything__echo', arguments: { message: 'hello' } });
    const meta = await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'everything', tool: 'echo', arguments: { message: 'hello' } },
    });
    assert.deepEqual(direct.content, meta.content);
    assert.equal(direct.isError, meta.isError);
    const [first, second] = auditLines().slice(-2);
    const strip = ({ time, durationMs, ...rest }) => rest;
    assert.deepEqual(strip(first), strip(second));
    assert.deepEqual(strip(first), { caller: 'local', server: 'everything', tool: 'echo', argumentKeys: ['message'], outcome: 'ok' });
  });

  test('an exposed tool is validated as through execute_tool', async () => {
    const bad = await gateway.client.callTool({ name: 'everything__echo', arguments: { message: 42 } });
    assert.equal(bad.isError, true);
    const body = JSON.parse(bad.content[0].text);
    assert.equal(body.error.code, 'VALIDATION_ERROR');
    assert.equal(auditLines().at(-1).errorCode, 'VALIDATION_ERROR');
  });

  test('list_mcp_servers reports the exposed tools and the o200k tokens they add', async () => {
    const { body } = await call(gateway.client, 'list_mcp_servers');
    const exposed = (await gateway.client.listTools()).tools.filter((t) => !META_TOOLS.includes(t.name));
    const tokens = getEncoding('o200k_base').encode(JSON.stringify(exposed)).length;
    assert.deepEqual(body.exposedTools, { tools: 2, tokens });
  });

  test('config show counts the same tools and tokens from the cached tool lists', async () => {
    const { body } = await call(gateway.client, 'list_mcp_servers');
    const shown = spawnSync(process.execPath, [bin, 'config', 'show', '--json', '--config', configPath], {
      env: isolatedEnv({ ANYGPT_DISCOVERY_STATE_DIR: stateDir, ANYGPT_DISCOVERY_CACHE_DIR: cacheDir }),
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(shown.status, 0, shown.stderr);
    assert.deepEqual(JSON.parse(shown.stdout).exposedTools, body.exposedTools);
  });

  test('an unknown name is still invalid params', async () => {
    await assert.rejects(gateway.client.callTool({ name: 'everything__nothing', arguments: {} }), (error) => {
      assert.equal(error.code, -32602);
      return true;
    });
  });

  test('a reload that changes the exposed set sends tools/list_changed once', async () => {
    let changed = 0;
    gateway.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      changed += 1;
    });
    await gateway.client.listTools();
    writeFileSync(configPath, JSON.stringify(configOf(['everything:echo', 'everything:get-env'])));
    assert.ok(await waitFor(() => changed > 0, 10_000), 'no tools/list_changed');
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.equal(changed, 1);
    const names = (await gateway.client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(names, [...META_TOOLS, 'everything__echo', 'everything__get-env']);
  });
});
