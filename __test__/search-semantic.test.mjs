// Search behaviour the semantic tier brings, through the gateway with real servers: deprecated
// tools rank below their live replacement and say so, and list_mcp_servers tells whether the
// tier is on. (The tier's fusion itself is tested in Rust on a tiny model the test writes.)
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { writeTinyModel } from './fixtures/tiny-model.mjs';
import { call, demoFiles, isolatedEnv, referenceServer, root, startGateway, tempDir, writeConfig } from './helpers.mjs';

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

// In its own Node process: the package is found once, when index.js loads. For each config,
// a DiscoveryEngine from the JS API: its semantic status once loading is over, and a search.
const ENGINE_SCRIPT = `
const { DiscoveryEngine } = require(process.argv[1]);
(async () => {
  const answers = [];
  for (const config of JSON.parse(process.argv[2])) {
    const engine = new DiscoveryEngine(config);
    const until = Date.now() + 30000;
    while (engine.semanticSearch().status === 'loading' && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const semantic = engine.semanticSearch();
    const found = await engine.searchTools('read a file');
    answers.push({ semantic, tools: found.results.map((r) => r.tool) });
    await engine.close();
  }
  process.stdout.write(JSON.stringify(answers));
})();
`;

/** Run ENGINE_SCRIPT over `configs` with `env` added to an isolated environment. */
async function engineAnswers(configs, env) {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['-e', ENGINE_SCRIPT, join(root, 'index.js'), JSON.stringify(configs)],
    { env: isolatedEnv({ ANYGPT_SEARCH_MODEL: '', ...env }), timeout: 60_000 },
  );
  return JSON.parse(stdout);
}

describe('a DiscoveryEngine from the Node API', () => {
  // The weights package "installed beside this one": a node_modules folder that `require`
  // searches (NODE_PATH), holding the package with a tiny random-weight model.
  const modules = join(tempDir(), 'node_modules');
  const packageDir = join(modules, '@anygpt', 'discovery-model-minilm');
  mkdirSync(packageDir, { recursive: true });
  writeFileSync(join(packageDir, 'package.json'), JSON.stringify({ name: '@anygpt/discovery-model-minilm', version: '0.0.0' }));
  writeTinyModel(join(packageDir, 'model'));
  const servers = [referenceServer('filesystem', [demoFiles])];

  test('finds the weights package beside it: semantic search is on and search answers', async () => {
    const [answer] = await engineAnswers([{ discovery: { servers } }], { NODE_PATH: modules });
    assert.deepEqual(answer.semantic, { status: 'on', detail: 'tiny-test' });
    assert.ok(answer.tools.includes('read_text_file'), answer.tools.join());
  });

  test('search.model, then ANYGPT_SEARCH_MODEL, come before the package', async () => {
    const configured = join(tempDir(), 'configured-model');
    const fromEnv = join(tempDir(), 'env-model');
    const answers = await engineAnswers(
      [{ discovery: { servers, search: { model: configured } } }, { discovery: { servers } }],
      { NODE_PATH: modules, ANYGPT_SEARCH_MODEL: fromEnv },
    );
    // Neither folder holds a model: each engine names the one it was told to use, and
    // searches lexically.
    for (const [answer, dir] of [[answers[0], configured], [answers[1], fromEnv]]) {
      assert.equal(answer.semantic.status, 'failed', JSON.stringify(answer));
      assert.ok(answer.semantic.detail.includes(dir), answer.semantic.detail);
      assert.ok(answer.tools.includes('read_text_file'), answer.tools.join());
    }
  });

  test('without the package nor a setting, search is lexical', async () => {
    const [answer] = await engineAnswers([{ discovery: { servers } }], {});
    assert.deepEqual(answer.semantic, { status: 'no-model' });
    assert.ok(answer.tools.includes('read_text_file'), answer.tools.join());
  });
});
