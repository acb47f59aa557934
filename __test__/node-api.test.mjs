// The Node API's argument checks: values JS can pass that Rust types cannot hold.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DiscoveryEngine } from '../index.js';
import { referenceServer, tempDir } from './helpers.mjs';

// The engine runs in this process: keep its snapshots and audit log out of the user's folders.
process.env.ANYGPT_DISCOVERY_CACHE_DIR = tempDir('anygpt-discovery-cache-');
process.env.ANYGPT_DISCOVERY_STATE_DIR = tempDir('anygpt-discovery-state-');

describe('executeTool timeoutMs', () => {
  let engine;
  before(() => {
    engine = new DiscoveryEngine({ discovery: { servers: [referenceServer('everything')] } });
  });
  after(async () => {
    await engine.close();
  });

  for (const [label, timeoutMs] of [
    ['Infinity', Infinity],
    ['2**32', 2 ** 32],
    ['NaN', NaN],
    ['-1', -1],
    ['0', 0],
    ['1.5', 1.5],
    ['2**31', 2 ** 31],
  ]) {
    test(`${label} is a VALIDATION_ERROR naming timeoutMs and its range`, async () => {
      await assert.rejects(
        engine.executeTool('everything', 'echo', { message: 'x' }, { timeoutMs }),
        (error) => {
          assert.equal(error.code, 'VALIDATION_ERROR');
          assert.match(error.message, /`timeoutMs` must be an integer from 1 to 2147483647/);
          assert.match(error.message, new RegExp(`got ${label === '2**32' ? '4294967296' : label === '2**31' ? '2147483648' : label.replace('.', '\\.')}`));
          return true;
        },
      );
    });
  }

  test('the largest allowed value runs the call', async () => {
    const result = await engine.executeTool('everything', 'echo', { message: 'in range' }, { timeoutMs: 2147483647 });
    assert.equal(result.content[0].text, 'Echo: in range');
  });
});

describe('searchTools limit', () => {
  let engine;
  before(() => {
    engine = new DiscoveryEngine({ discovery: { servers: [referenceServer('everything')] } });
  });
  after(async () => {
    await engine.close();
  });

  // 2**32 + 5 wrapped to 5 and 1.5 was cut to 1 before: accepted without a word.
  for (const [label, limit, shown] of [
    ['2**32 + 5', 2 ** 32 + 5, '4294967301'],
    ['1.5', 1.5, '1\\.5'],
    ['-1', -1, '-1'],
    ['101', 101, '101'],
  ]) {
    test(`${label} is a VALIDATION_ERROR naming limit and its range`, async () => {
      await assert.rejects(engine.searchTools('echo', { limit }), (error) => {
        assert.equal(error.code, 'VALIDATION_ERROR');
        assert.match(error.message, new RegExp(`\`limit\` must be an integer from 1 to 100; got ${shown}`));
        return true;
      });
    });
  }

  test('a limit in range limits the results', async () => {
    const { results } = await engine.searchTools('echo message', { limit: 2 });
    assert.ok(results.length >= 1 && results.length <= 2, JSON.stringify(results));
  });
});
