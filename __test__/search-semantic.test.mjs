// Search behaviour the semantic tier brings, through the gateway with real servers: deprecated
// tools rank below their live replacement and say so, and list_mcp_servers tells whether the
// tier is on. (The tier's fusion itself is tested in Rust on a tiny model the test writes.)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, demoFiles, referenceServer, startGateway, writeConfig } from './helpers.mjs';

describe('search with server-filesystem\'s real descriptions', () => {
  let gateway;
  before(async () => {
    const config = writeConfig({ discovery: { servers: [referenceServer('filesystem', [demoFiles])] } });
    // No model, whatever the developer's environment says.
    gateway = await startGateway(config, { ANYGPT_SEARCH_MODEL: '' });
  });
  after(async () => {
    await gateway.client.close();
  });

  test('"read a file" ranks read_text_file above the deprecated read_file, whose summary keeps the note', async () => {
    const { body } = await call(gateway.client, 'search_tools', { query: 'read a file' });
    const names = body.results.map((r) => r.tool);
    assert.ok(names.includes('read_file') && names.includes('read_text_file'), names.join());
    assert.ok(names.indexOf('read_text_file') < names.indexOf('read_file'), names.join());
    const deprecated = body.results.find((r) => r.tool === 'read_file');
    assert.match(deprecated.summary, /DEPRECATED: Use read_text_file instead/);
    assert.ok(deprecated.summary.length <= 120, deprecated.summary);
  });

  test('list_mcp_servers says nothing of a semantic tier without a model', async () => {
    const { body } = await call(gateway.client, 'list_mcp_servers');
    assert.equal(body.semanticSearch, undefined);
  });
});

describe('search.semantic: false', () => {
  test('turns the tier off, and list_mcp_servers says so', async () => {
    const config = writeConfig({
      discovery: { servers: [referenceServer('filesystem', [demoFiles])], search: { semantic: false } },
    });
    const gateway = await startGateway(config);
    try {
      const { body } = await call(gateway.client, 'list_mcp_servers');
      assert.equal(body.semanticSearch, 'off');
      const { body: search } = await call(gateway.client, 'search_tools', { query: 'read a file' });
      assert.equal(search.vectorsPending, undefined);
    } finally {
      await gateway.client.close();
    }
  });
});
