// Confirmation before a call (toolRules `confirm`): the npm bin serving server-memory, driven
// by the official client with and without elicitation. Accept → the server sees the call;
// decline or cancel → it never does, and the model reads why; a client that cannot be asked is
// refused with the documented message unless the rule says "when-supported"; the CLI refuses
// without a terminal unless --yes. Every answer is in the audit log.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { bin, isolatedEnv, referenceServer, startGateway, tempDir, writeConfig } from './helpers.mjs';

const SECRET = 'sk-live-confirm-0a1b2c3d4e5f6a7b8c9d';
const memory = referenceServer('memory');
// The token in the server's env is a registered secret: no question may show it.
memory.connection.env = { API_TOKEN: SECRET, MEMORY_FILE_PATH: join(tempDir(), 'memory.jsonl') };
const config = {
  discovery: {
    servers: [memory],
    toolRules: [
      { server: 'memory', pattern: 'create_entities', confirm: true },
      { server: 'memory', pattern: 'add_observations', confirm: 'when-supported' },
    ],
  },
};

const entity = (name) => ({ entities: [{ name, entityType: 'test', observations: [`key ${SECRET}`] }] });
const names = async (client) => {
  const result = await client.callTool({ name: 'execute_tool', arguments: { server: 'memory', tool: 'read_graph' } });
  return JSON.parse(result.content[0].text).entities.map((e) => e.name);
};
const errorOf = (result) => JSON.parse(result.content[0].text).error;

/** The gateway with a client that answers every elicitation with `answer()`, recording the questions. */
async function askingGateway(configPath, env, answer) {
  const transport = new StdioClientTransport({ command: process.execPath, args: [bin, '--config', configPath], env: isolatedEnv(env), stderr: 'pipe' });
  const client = new Client({ name: 'confirm-tests', version: '0.0.0' }, { capabilities: { elicitation: {} } });
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params);
    return answer();
  });
  await client.connect(transport);
  return { client, asked };
}

describe('confirmation before a call', () => {
  const stateDir = tempDir('anygpt-discovery-state-');
  const env = { ANYGPT_DISCOVERY_STATE_DIR: stateDir };
  const configPath = writeConfig(config);
  const audit = () => readFileSync(join(stateDir, 'audit.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  let asking;
  let reply = { action: 'accept' };

  before(async () => {
    asking = await askingGateway(configPath, env, () => reply);
  });
  after(async () => {
    await asking?.client.close();
  });

  test('accept: the question names server, tool and arguments (secrets scrubbed), then the server sees the call', async () => {
    reply = { action: 'accept', content: {} };
    const result = await asking.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'memory', tool: 'create_entities', arguments: entity('accepted') },
    });
    assert.notEqual(result.isError, true, JSON.stringify(result));
    const question = asking.asked.at(-1);
    assert.match(question.message, /^Allow the call of tool `create_entities` on server `memory`\?\nArguments: \{"entities":/);
    assert.ok(question.message.includes('"accepted"'), question.message);
    assert.ok(!question.message.includes(SECRET), question.message);
    assert.deepEqual(question.requestedSchema.properties, {});
    assert.ok((await names(asking.client)).includes('accepted'));
    const line = audit().findLast((l) => l.tool === 'create_entities');
    assert.equal(line.confirm, 'accepted');
    assert.equal(line.outcome, 'ok');
  });

  test('decline and cancel: an isError result the model understands, and the server never sees the call', async () => {
    for (const action of ['decline', 'cancel']) {
      reply = { action };
      const result = await asking.client.callTool({
        name: 'execute_tool',
        arguments: { server: 'memory', tool: 'create_entities', arguments: entity(`refused-${action}`) },
      });
      assert.equal(result.isError, true);
      const error = errorOf(result);
      assert.equal(error.code, 'TOOL_NOT_CONFIRMED');
      assert.match(error.message, action === 'decline' ? /the user declined the call of tool `memory:create_entities`; it did not run/ : /the user dismissed the confirmation/);
      assert.ok(!(await names(asking.client)).includes(`refused-${action}`));
      const line = audit().findLast((l) => l.tool === 'create_entities');
      assert.equal(line.confirm, action === 'decline' ? 'declined' : 'cancelled');
      assert.equal(line.errorCode, 'TOOL_NOT_CONFIRMED');
    }
  });

  test('a tool without confirm is never asked about', async () => {
    const before = asking.asked.length;
    await names(asking.client);
    assert.equal(asking.asked.length, before);
  });

  describe('a client without elicitation', () => {
    let plain;
    before(async () => {
      plain = await startGateway(configPath, env);
    });
    after(async () => {
      await plain?.client.close();
    });

    test('confirm: true is refused with the documented message; the server never sees the call', async () => {
      const result = await plain.client.callTool({
        name: 'execute_tool',
        arguments: { server: 'memory', tool: 'create_entities', arguments: entity('unasked') },
      });
      assert.equal(result.isError, true);
      assert.equal(
        errorOf(result).message,
        "tool `memory:create_entities` needs the user's confirmation (toolRules `confirm: true`) and nobody can be asked here (the client does not support elicitation, or the command has no terminal); it did not run. To allow it, set `confirm: \"when-supported\"` in that rule (runs without asking where nobody can be asked), or run it from a terminal: `anygpt-discovery execute memory create_entities` (`--yes` answers beforehand)",
      );
      assert.ok(!(await names(plain.client)).includes('unasked'));
      assert.equal(audit().findLast((l) => l.tool === 'create_entities').confirm, 'unasked');
    });

    test('confirm: "when-supported" runs without asking, and the audit says so', async () => {
      const result = await plain.client.callTool({
        name: 'execute_tool',
        arguments: { server: 'memory', tool: 'add_observations', arguments: { observations: [{ entityName: 'accepted', contents: ['more'] }] } },
      });
      assert.notEqual(result.isError, true, JSON.stringify(result));
      assert.equal(audit().findLast((l) => l.tool === 'add_observations').confirm, 'unsupported');
    });
  });

  test('CLI: no terminal and no --yes → refused (exit 4); --yes runs it', () => {
    const run = (extra) => spawnSync(
      process.execPath,
      [bin, 'execute', 'memory', 'create_entities', '--args', JSON.stringify(entity(`cli${extra.length}`)), '--config', configPath, ...extra],
      { env: isolatedEnv(env), encoding: 'utf8', timeout: 60_000 },
    );
    const refused = run([]);
    assert.equal(refused.status, 4, refused.stderr);
    assert.match(refused.stderr, /TOOL_NOT_CONFIRMED[\s\S]*tool `memory:create_entities` needs the user's confirmation/);
    const yes = run(['--yes']);
    assert.equal(yes.status, 0, yes.stderr);
    const lines = audit().filter((l) => l.tool === 'create_entities').slice(-2);
    assert.deepEqual(lines.map((l) => l.confirm), ['unasked', 'preapproved']);
  });
});
