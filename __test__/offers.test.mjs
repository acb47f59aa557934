// Prompts, resources and completions of the downstream servers through the gateway: the npm
// bin serving server-everything (prompts, resources, templates, completions) and a fixture
// whose resource URI collides with one of server-everything's, driven by the official client.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PromptListChangedNotificationSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { call, referenceServer, root, startGateway, tempDir, waitFor, writeConfig } from './helpers.mjs';

const SHARED_URI = 'demo://resource/static/document/architecture.md';
const TOKEN = 'sk-live-twin-7e6d5c4b3a2f1e0d';
const twin = {
  name: 'twin',
  connection: {
    command: process.execPath,
    args: [join(root, '__test__/fixtures/twin-resource-server.mjs')],
    env: { API_TOKEN: TOKEN },
  },
};

describe('prompts, resources and completions through the gateway', () => {
  let gateway;
  before(async () => {
    const config = writeConfig({
      discovery: { servers: [referenceServer('everything', ['stdio']), twin], maxResultBytes: 4096 },
    });
    gateway = await startGateway(config);
  });
  after(async () => {
    await gateway?.client.close();
  });

  test('the gateway declares prompts, resources and completions', () => {
    const capabilities = gateway.client.getServerCapabilities();
    assert.ok(capabilities.prompts && capabilities.resources && capabilities.completions, JSON.stringify(capabilities));
  });

  test("prompts/list names each server's prompts <server>__<prompt> with their descriptions", async () => {
    const { prompts } = await gateway.client.listPrompts();
    const names = prompts.map((p) => p.name);
    for (const name of ['simple-prompt', 'args-prompt', 'completable-prompt']) {
      assert.ok(names.includes(`everything__${name}`), names.join(', '));
    }
    for (const name of names) assert.match(name, /^[A-Za-z0-9_-]{1,64}$/);
    const completable = prompts.find((p) => p.name === 'everything__completable-prompt');
    assert.equal(completable.description, 'First argument choice narrows values for second argument.');
    assert.deepEqual(completable.arguments.map((a) => a.name), ['department', 'name']);
  });

  test('listings are paged by servers: two servers fit one page, a foreign cursor is refused', async () => {
    const page = await gateway.client.listPrompts();
    assert.equal(page.nextCursor, undefined);
    await assert.rejects(gateway.client.listResources({ cursor: 'not-ours' }), (error) => {
      assert.equal(error.code, -32602);
      assert.match(error.message, /is not a cursor this gateway gave/);
      return true;
    });
  });

  test('prompts/get reaches the owning server under its own prompt name', async () => {
    const result = await gateway.client.getPrompt({ name: 'everything__args-prompt', arguments: { city: 'Lyon' } });
    assert.match(JSON.stringify(result.messages), /Lyon/);
  });

  test('prompts/get of a name no server has is invalid params naming where to look', async () => {
    await assert.rejects(gateway.client.getPrompt({ name: 'nobody__nothing' }), (error) => {
      assert.equal(error.code, -32602);
      assert.match(error.message, /prompts\/list gives the names/);
      return true;
    });
  });

  test("a server's own error for prompts/get comes back naming the request and the server", async () => {
    // args-prompt requires `city`: server-everything refuses the request without it.
    await assert.rejects(gateway.client.getPrompt({ name: 'everything__args-prompt' }), (error) => {
      assert.match(error.message, /TOOL_EXECUTION_ERROR: prompts\/get on server `everything` failed/);
      return true;
    });
  });

  test('a URI two servers list: the first keeps it, the second is served under anygpt://<server>/', async () => {
    const { resources } = await gateway.client.listResources();
    const uris = resources.map((r) => r.uri);
    assert.ok(uris.includes(SHARED_URI), uris.join(', '));
    assert.ok(uris.includes(`anygpt://twin/${SHARED_URI}`), uris.join(', '));
    const first = await gateway.client.readResource({ uri: SHARED_URI });
    assert.doesNotMatch(first.contents[0].text, /written by the twin server/);
    assert.equal(first.contents[0].uri, SHARED_URI);
    const second = await gateway.client.readResource({ uri: `anygpt://twin/${SHARED_URI}` });
    assert.equal(second.contents[0].text, 'written by the twin server');
    assert.equal(second.contents[0].uri, `anygpt://twin/${SHARED_URI}`);
  });

  test('a URI filled in from a template reaches the server of that template', async () => {
    const { resourceTemplates } = await gateway.client.listResourceTemplates();
    const templates = resourceTemplates.map((t) => t.uriTemplate);
    assert.ok(templates.includes('demo://resource/dynamic/text/{resourceId}'), templates.join(', '));
    assert.ok(templates.includes('twin://note/{id}'), templates.join(', '));
    const everything = await gateway.client.readResource({ uri: 'demo://resource/dynamic/text/7' });
    assert.match(everything.contents[0].text, /7/);
    const note = await gateway.client.readResource({ uri: 'twin://note/42' });
    assert.equal(note.contents[0].text, 'twin note 42');
  });

  test("a server's registered secret never leaves in prompts, messages, resource lists or contents", async () => {
    const { prompts } = await gateway.client.listPrompts();
    const hello = prompts.find((p) => p.name === 'twin__twin-hello');
    assert.equal(hello.description, 'Says hello from the twin (token ***).');
    const message = await gateway.client.getPrompt({ name: 'twin__twin-hello' });
    assert.equal(message.messages[0].content.text, 'hello from the twin, token ***');
    const { resources } = await gateway.client.listResources();
    assert.equal(resources.find((r) => r.uri === 'twin://leak').description, 'Holds the token ***.');
    const { contents } = await gateway.client.readResource({ uri: 'twin://leak' });
    assert.equal(contents[0].text, 'API_TOKEN=***');
    assert.ok(!JSON.stringify([prompts, message, resources, contents]).includes(TOKEN));
  });

  test('resource contents over maxResultBytes are cut and say so', async () => {
    const { contents } = await gateway.client.readResource({ uri: 'twin://large' });
    assert.equal(contents[0].text.length, 4096);
    assert.match(contents.at(-1).text, /1048576 bytes exceed maxResultBytes 4096/);
  });

  test('completion/complete for a prompt argument is routed, with its context', async () => {
    const department = await gateway.client.complete({
      ref: { type: 'ref/prompt', name: 'everything__completable-prompt' },
      argument: { name: 'department', value: 'Eng' },
    });
    assert.deepEqual(department.completion.values, ['Engineering']);
    const name = await gateway.client.complete({
      ref: { type: 'ref/prompt', name: 'everything__completable-prompt' },
      argument: { name: 'name', value: '' },
      context: { arguments: { department: 'Sales' } },
    });
    assert.deepEqual(name.completion.values, ['David', 'Eve', 'Frank']);
  });

  test('resources/subscribe reaches the owning server; its updates come back under the URI subscribed', async () => {
    const updates = [];
    gateway.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(n.params.uri);
    });
    // The twin answers a subscription with an update of the URI it knows (SHARED_URI).
    await gateway.client.subscribeResource({ uri: `anygpt://twin/${SHARED_URI}` });
    assert.ok(await waitFor(() => updates.length > 0, 5000), 'no resources/updated from the twin');
    assert.deepEqual(updates, [`anygpt://twin/${SHARED_URI}`]);
    // server-everything sends updates of what is subscribed once its toggle tool is called.
    await gateway.client.subscribeResource({ uri: SHARED_URI });
    await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'everything', tool: 'toggle-subscriber-updates', arguments: {} },
    });
    assert.ok(await waitFor(() => updates.includes(SHARED_URI), 5000), JSON.stringify(updates));
    await gateway.client.unsubscribeResource({ uri: SHARED_URI });
    await gateway.client.unsubscribeResource({ uri: `anygpt://twin/${SHARED_URI}` });
  });

  test('three prompts added downstream reach the client as one prompts/list_changed', async () => {
    let changed = 0;
    gateway.client.setNotificationHandler(PromptListChangedNotificationSchema, () => {
      changed += 1;
    });
    await gateway.client.callTool({
      name: 'execute_tool',
      arguments: { server: 'twin', tool: 'twin_add_prompts', arguments: {} },
    });
    assert.ok(await waitFor(() => changed > 0, 5000), 'no prompts/list_changed');
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.equal(changed, 1);
    const names = (await gateway.client.listPrompts()).prompts.map((p) => p.name);
    for (const name of ['twin__twin-hello', 'twin__twin-added-1', 'twin__twin-added-3']) {
      assert.ok(names.includes(name), names.join(', '));
    }
  });

  test('tools/list is still exactly the five meta-tools', async () => {
    const { tools } = await gateway.client.listTools();
    assert.equal(tools.length, 5);
  });
});

test("an idle server's prompts are listed from its snapshot without starting it", async () => {
  const env = { ANYGPT_DISCOVERY_CACHE_DIR: tempDir('anygpt-discovery-cache-') };
  const config = writeConfig({ discovery: { servers: [referenceServer('everything', ['stdio'])] } });
  const first = await startGateway(config, env);
  try {
    const { prompts } = await first.client.listPrompts();
    assert.ok(prompts.some((p) => p.name === 'everything__simple-prompt'));
  } finally {
    await first.client.close();
  }
  // Second run: the tool snapshot is fresh, so the server stays idle; so must prompts/list.
  const second = await startGateway(config, env);
  try {
    const { prompts } = await second.client.listPrompts();
    assert.ok(prompts.some((p) => p.name === 'everything__args-prompt'), prompts.map((p) => p.name).join(', '));
    const { body } = await call(second.client, 'list_mcp_servers');
    assert.equal(body.servers[0].status, 'idle', JSON.stringify(body.servers[0]));
    // Getting one starts it.
    const result = await second.client.getPrompt({ name: 'everything__simple-prompt' });
    assert.ok(result.messages.length > 0);
  } finally {
    await second.client.close();
  }
});

test('a server with prompts and resources but no tools is connected and served', async () => {
  const config = writeConfig({
    discovery: {
      servers: [{
        name: 'bare',
        connection: { command: process.execPath, args: [join(root, '__test__/fixtures/twin-resource-server.mjs'), '--no-tools'] },
      }],
    },
  });
  const gateway = await startGateway(config);
  try {
    const { prompts } = await gateway.client.listPrompts();
    assert.deepEqual(prompts.map((p) => p.name), ['bare__twin-hello']);
    const { contents } = await gateway.client.readResource({ uri: SHARED_URI });
    assert.equal(contents[0].text, 'written by the twin server');
    const { body } = await call(gateway.client, 'list_mcp_servers');
    assert.deepEqual([body.servers[0].status, body.servers[0].toolCount], ['connected', 0], JSON.stringify(body.servers[0]));
  } finally {
    await gateway.client.close();
  }
});
