// Replicas on loopback (#27): a real redis-server as the store two `serve --http` replicas share,
// a real haproxy in front health-checking `/readyz`, and through it a client whose requests
// alternate replicas. A tool list changed on one replica is searched on the other; a third
// replica started with an empty cache answers from the store before any server starts (and,
// with the semantic tier on, embeds nothing another replica embedded); Redis killed mid-run
// leaves both serving and saying so, and restarted they sync again; a replica SIGKILLed under
// load loses no answered call and runs no call twice but those that failed.
//
// redis-server and haproxy are Debian's (npm test installs them when missing: scripts/debian.mjs).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  auditEntries,
  fixtureEntry,
  metaCall,
  metric,
  readyz,
  recorded,
  replicaConfig,
  startHaproxy,
  startRedis,
  startReplica,
  stopReplica,
  waitReady,
} from './cluster.mjs';
import { writeTinyModel } from './fixtures/tiny-model.mjs';
import { descendants, eventually, freePort, referenceServer, tempDir } from './helpers.mjs';

/** The public catalog's size in the issue: the catalog server lists this many tools. */
const CATALOG = 5_600;
/** A catalog tool and the words that must find it first (its description). */
const NEEDLE = { tool: '46elks-sms__send_sms', query: 'Send SMS message via 46elks Swedish telecommunications' };
/** The killed-replica load: CALLS calls from CLIENTS clients, the kill after KILL_AFTER answers. */
const CALLS = 2_000;
const CLIENTS = 20;
const KILL_AFTER = 600;
/** Generous bounds (the figures are printed; bench/replicas.mjs measures them). */
const PROPAGATION_MS = 10_000;
const THIRD_READY_MS = 60_000;

/** Tool texts a replica embedded itself (not read from its cache or the store). */
const EMBEDDED = 'discovery_semantic_embedded_total';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const until = (probe, ms) => eventually(probe, ms);

/** Whether `search_tools` on `url` finds `tool` of `server` for `query` (first, when `first`). */
async function finds(url, query, server, tool, { first = false } = {}) {
  const { body } = await metaCall(url, 'search_tools', { query });
  const results = body?.results ?? [];
  const hit = (r) => r.server === server && r.tool === tool;
  return first ? results.length > 0 && hit(results[0]) : results.some(hit);
}

/** The gateway pids whose fixture process answered a tools/list, from its log. */
const listers = (path) => {
  try {
    return readFileSync(path, 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
};

describe('replicas sharing one redis-server behind haproxy', () => {
  let redis;
  let lb;
  let a;
  let b;
  let config;
  const dir = tempDir('anygpt-replicas-');
  const files = { record: join(dir, 'record'), added: join(dir, 'added'), lists: join(dir, 'lists') };

  before(async () => {
    redis = await startRedis();
    const lbPort = await freePort();
    config = replicaConfig({
      servers: [
        referenceServer('everything'),
        fixtureEntry('fixture', { record: files.record, added: files.added, 'list-log': files.lists, delay: 20 }),
        fixtureEntry('catalog', { catalog: CATALOG }),
      ],
      storeUrl: redis.url,
      publicUrl: `http://127.0.0.1:${lbPort}/mcp`,
    });
    [a, b] = await Promise.all([startReplica('a', config), startReplica('b', config)]);
    await Promise.all([waitReady(a.base), waitReady(b.base)]);
    // Started cold (no snapshot), each lists its servers after it is ready: wait for the whole
    // catalog, so that later timings measure what they say and not this first indexing.
    for (const replica of [a, b]) {
      const listed = await until(async () => {
        const { body } = await metaCall(replica.url, 'list_mcp_servers');
        return body?.servers?.every((s) => s.status === 'connected') && body.servers.find((s) => s.name === 'catalog').toolCount === CATALOG;
      }, 120_000);
      assert.ok(listed, `replica ${replica.name} did not list its servers: ${JSON.stringify((await metaCall(replica.url, 'list_mcp_servers')).body)}`);
    }
    lb = await startHaproxy(
      [a, b].map((r) => ({ name: r.name, port: r.port })),
      lbPort,
    );
    await lb.waitUp(['a', 'b']);
  });

  after(async () => {
    await lb?.stop();
    await Promise.all([a, b].filter(Boolean).map(stopReplica));
    await redis?.stop();
  });

  test('a client whose requests alternate replicas completes search → details → execute', async () => {
    const search = await metaCall(lb.url, 'search_tools', { query: 'echo back a message' });
    const found = search.body.results[0];
    assert.deepEqual([found.server, found.tool], ['everything', 'echo'], JSON.stringify(search.body));
    const details = await metaCall(lb.url, 'get_tool_details', { server: found.server, tool: found.tool });
    assert.ok(details.body.inputSchema.properties.message, JSON.stringify(details.body));
    const run = await metaCall(lb.url, 'execute_tool', { server: found.server, tool: found.tool, arguments: { message: 'across replicas' } });
    assert.equal(run.answer.result.content[0].text, 'Echo: across replicas');
    const path = [search.replica, details.replica, run.replica];
    console.log(`haproxy: ${JSON.stringify(await lb.states())}`);
    console.log(`search → details → execute answered by ${path.join(' → ')}`);
    // Round robin: the three requests of one task went to both replicas (haproxy's order may
    // start on either, and repeats one after a server's state changed).
    assert.deepEqual(new Set(path), new Set(['a', 'b']));
  });

  test('a tool list changed on one replica is searchable on the other within the bound', async () => {
    const name = `quokkaledger${process.pid}`;
    const listedBefore = listers(files.lists).filter((pid) => pid === b.pid).length;
    assert.equal(await finds(b.url, name, 'fixture', name), false);
    const added = await metaCall(a.url, 'execute_tool', { server: 'fixture', tool: 'add_tool', arguments: { name } });
    assert.equal(added.answer.result.content[0].text, `added ${name}`);
    const changedAt = performance.now();
    assert.ok(await until(() => finds(a.url, name, 'fixture', name), PROPAGATION_MS), 'the replica whose server changed finds the new tool');
    const seen = await until(() => finds(b.url, name, 'fixture', name), PROPAGATION_MS);
    const ms = performance.now() - changedAt;
    console.log(`a tool added on replica a was searchable on replica b ${ms.toFixed(0)} ms after its add answered`);
    assert.ok(seen, `replica b did not find ${name} within ${PROPAGATION_MS} ms`);
    // From the store: b's own copy of the server was not asked for its list again.
    assert.equal(listers(files.lists).filter((pid) => pid === b.pid).length, listedBefore);
  });

  test(`a third replica with an empty cache answers search_tools from the store's ${CATALOG}-tool catalog, starting no server`, async () => {
    const c = await startReplica('c', config);
    try {
      const ready = await until(async () => (await readyz(c.base)).status === 200, THIRD_READY_MS);
      const readyMs = performance.now() - c.spawnedAt;
      assert.ok(ready, `the third replica not ready within ${THIRD_READY_MS} ms: ${JSON.stringify(await readyz(c.base))}`);
      const hit = await until(() => finds(c.url, NEEDLE.query, 'catalog', NEEDLE.tool, { first: true }), THIRD_READY_MS);
      const hitMs = performance.now() - c.spawnedAt;
      console.log(`third replica, empty cache, ${CATALOG}-tool catalog in the store: spawn → ready ${readyMs.toFixed(0)} ms, spawn → first correct hit ${hitMs.toFixed(0)} ms`);
      assert.ok(hit, `the third replica never ranked ${NEEDLE.tool} first for "${NEEDLE.query}"`);
      // The whole catalog, from the store: every server idle, none started, none listed.
      const { body: servers } = await metaCall(c.url, 'list_mcp_servers');
      const catalog = servers.servers.find((s) => s.name === 'catalog');
      assert.equal(catalog.toolCount, CATALOG, JSON.stringify(servers));
      for (const server of servers.servers) assert.equal(server.status, 'idle', JSON.stringify(servers));
      assert.deepEqual(descendants(c.pid), [], 'the third replica started no server process');
      assert.ok(!listers(files.lists).includes(c.pid), 'the fixture was never listed for the third replica');
    } finally {
      await stopReplica(c);
    }
  });

  // The semantic tier over the store (a debug build embeds ~10 texts a second with the tiny
  // model, so this pair lists server-everything alone; bench/replicas.mjs does the catalog).
  test('with the semantic tier on, a replica with an empty cache reads the vectors another embedded and embeds nothing', async () => {
    const env = { ANYGPT_SEARCH_MODEL: writeTinyModel(join(dir, 'model')) };
    const semantic = replicaConfig({ servers: [referenceServer('everything')], storeUrl: redis.url, publicUrl: `http://127.0.0.1:${lb.port}/mcp` });
    const first = await startReplica('d', semantic, { env });
    try {
      await waitReady(first.base);
      const embedded = await until(async () => {
        const { body } = await metaCall(first.url, 'search_tools', { query: 'echo back a message' });
        const count = await metric(first.base, EMBEDDED);
        return body?.results?.length > 0 && body.vectorsPending === undefined && count > 0 ? count : null;
      }, 120_000);
      assert.ok(embedded, `the first replica did not embed its tools: ${JSON.stringify((await metaCall(first.url, 'list_mcp_servers')).body)}`);
      const fresh = await startReplica('e', semantic, { env });
      try {
        await waitReady(fresh.base);
        const on = await until(async () => (await metaCall(fresh.url, 'list_mcp_servers')).body?.semanticSearch === 'on', 30_000);
        assert.ok(on, JSON.stringify((await metaCall(fresh.url, 'list_mcp_servers')).body));
        const ranked = await until(async () => {
          const { body } = await metaCall(fresh.url, 'search_tools', { query: 'echo back a message' });
          return body?.results?.[0]?.tool === 'echo' && body.vectorsPending === undefined;
        }, 30_000);
        assert.ok(ranked, 'the fresh replica never searched with every vector');
        assert.equal(await metric(fresh.base, EMBEDDED), 0);
        assert.deepEqual(descendants(fresh.pid), [], 'the fresh replica started no server process');
        console.log(`semantic tier: the first replica embedded ${embedded} tool texts, the one started after it none`);
      } finally {
        await stopReplica(fresh);
      }
    } finally {
      await stopReplica(first);
    }
  });

  test('Redis killed: both replicas keep serving from memory, and haproxy keeps both', async () => {
    await redis.stop();
    for (const replica of [a, b]) {
      assert.ok(await finds(replica.url, 'echo back a message', 'everything', 'echo'));
      assert.ok(await finds(replica.url, NEEDLE.query, 'catalog', NEEDLE.tool, { first: true }));
      const id = `redis-down-${replica.name}`;
      const run = await metaCall(replica.url, 'execute_tool', { server: 'fixture', tool: 'record_call', arguments: { id } });
      assert.equal(run.answer.result.content[0].text, `recorded ${id}`);
    }
    const run = await metaCall(lb.url, 'execute_tool', { server: 'everything', tool: 'echo', arguments: { message: 'no store' } });
    assert.equal(run.answer.result.content[0].text, 'Echo: no store');
    assert.deepEqual(await lb.states(), { a: 'UP', b: 'UP' });
  });

  test('Redis killed: /readyz stays 200 and says the store is down, discovery_store_up is 0', async () => {
    // Every replica subscribes to the store's change messages: it learns the store is gone
    // without waiting for a call to need it (README, "When the store is down").
    for (const replica of [a, b]) {
      const down = await until(async () => {
        const { status, body } = await readyz(replica.base);
        return status === 200 && body.store?.up === false && (await metric(replica.base, 'discovery_store_up')) === 0 ? body : null;
      }, 10_000);
      assert.ok(
        down,
        `replica ${replica.name}, 10 s after the store was killed: /readyz ${JSON.stringify(await readyz(replica.base))}, ` +
          `discovery_store_up ${await metric(replica.base, 'discovery_store_up')}`,
      );
      console.log(`replica ${replica.name} with the store down: /readyz 200, store ${JSON.stringify(down.store)}`);
    }
  });

  test('Redis restarted on its port: both replicas see it again, and a change after the restart reaches the other replica', async () => {
    redis = await startRedis(redis.port);
    for (const replica of [a, b]) {
      const up = await until(async () => {
        const { body } = await readyz(replica.base);
        return body.store?.up === true && (await metric(replica.base, 'discovery_store_up')) === 1;
      }, 15_000);
      assert.ok(up, `replica ${replica.name} never saw the store again: ${JSON.stringify(await readyz(replica.base))}`);
    }
    const name = `wombatregister${process.pid}`;
    await metaCall(b.url, 'execute_tool', { server: 'fixture', tool: 'add_tool', arguments: { name } });
    const changedAt = performance.now();
    const seen = await until(() => finds(a.url, name, 'fixture', name), PROPAGATION_MS);
    console.log(`after the store restarted: a tool added on replica b was searchable on replica a after ${(performance.now() - changedAt).toFixed(0)} ms`);
    assert.ok(seen, `replica a did not find ${name} within ${PROPAGATION_MS} ms of the change after the store restarted`);
  });

  test(`a replica SIGKILLed under load (${CALLS} calls, ${CLIENTS} clients): no answered call lost, failures only among calls in flight, each retried`, async () => {
    const attempts = [];
    let answered = 0;
    let killedAt = null;
    let next = 0;
    let diedAt = null;
    const kill = () => {
      killedAt = performance.now();
      b.child.kill('SIGKILL');
      b.exit.then(() => (diedAt = performance.now()));
    };
    /** One attempt of call `id`: recorded with its replica and outcome; true when answered. */
    const attempt = async (id, n) => {
      const entry = { id, n, startedAt: performance.now(), endedAt: null, replica: null, ok: false, why: null };
      attempts.push(entry);
      try {
        const result = await metaCall(lb.url, 'execute_tool', { server: 'fixture', tool: 'record_call', arguments: { id } });
        entry.replica = result.replica;
        entry.ok = result.answer?.result?.content?.[0]?.text === `recorded ${id}`;
        if (!entry.ok) entry.why = `HTTP ${result.status}: ${JSON.stringify(result.answer)?.slice(0, 300)}`;
      } catch (error) {
        entry.why = String(error.cause ?? error);
      }
      entry.endedAt = performance.now();
      return entry.ok;
    };
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (next < CALLS) {
          const id = `call${String(next++).padStart(4, '0')}`;
          let n = 0;
          while (!(await attempt(id, n++))) {
            assert.ok(n < 5, `call ${id} failed ${n} times: ${attempts.filter((e) => e.id === id).map((e) => e.why).join('; ')}`);
            await sleep(50);
          }
          if (++answered === KILL_AFTER) kill();
        }
      }),
    );
    assert.ok(killedAt !== null);
    await lb.waitUp(['a']);

    const failures = attempts.filter((e) => !e.ok);
    const answeredIds = new Set(attempts.filter((e) => e.ok).map((e) => e.id));
    assert.equal(answeredIds.size, CALLS, 'every call was answered, retried when it failed');
    // In flight when the replica was killed: sent before it was seen dead (a SIGKILL takes a
    // moment to land), not answered before the signal was sent.
    assert.ok(diedAt !== null);
    const inFlightAtKill = new Set(attempts.filter((e) => e.startedAt < diedAt && e.endedAt > killedAt));
    // Failures: only calls that were in flight when the replica died, on that replica.
    for (const failure of failures) {
      assert.ok(inFlightAtKill.has(failure), `a call that failed was sent ${(failure.startedAt - diedAt).toFixed(0)} ms after the replica was seen dead: ${failure.why}`);
      if (failure.replica !== null) assert.equal(failure.replica, 'b', failure.why);
      assert.ok(attempts.some((e) => e.id === failure.id && e.n > failure.n && e.ok), `call ${failure.id} was not retried successfully`);
    }
    // In flight on the killed replica: in flight at the kill and not answered by the other.
    const onKilled = [...inFlightAtKill].filter((e) => e.replica !== 'a').length;
    assert.ok(failures.length <= onKilled, `${failures.length} failures, ${onKilled} calls in flight on the killed replica`);

    // Every answered call is in the audit log of the replica that answered it.
    const audited = { a: new Set(), b: new Set() };
    for (const replica of [a, b]) {
      for (const entry of auditEntries(replica.audit)) {
        if (entry.tool === 'record_call' && entry.outcome === 'ok') audited[replica.name].add(entry.arguments.id);
      }
    }
    for (const entry of attempts.filter((e) => e.ok)) {
      assert.ok(audited[entry.replica]?.has(entry.id), `call ${entry.id}, answered by ${entry.replica}, is not in its audit log`);
    }

    // Executions, counted per call id by the server itself: every call ran; only a call whose
    // attempt failed may have run twice (the killed replica had sent it on before dying).
    const runs = new Map();
    for (const { id } of recorded(files.record)) if (id.startsWith('call')) runs.set(id, (runs.get(id) ?? 0) + 1);
    assert.equal(runs.size, CALLS, 'every call ran');
    const failedIds = new Set(failures.map((e) => e.id));
    const twice = [...runs].filter(([, count]) => count > 1).map(([id]) => id);
    for (const id of twice) assert.ok(failedIds.has(id), `call ${id} ran ${runs.get(id)} times but never failed`);
    assert.ok(twice.length <= failures.length);
    const byReplica = { a: 0, b: 0 };
    for (const entry of attempts.filter((e) => e.ok)) byReplica[entry.replica] += 1;
    console.log(
      `SIGKILL of replica b after ${KILL_AFTER} answers (dead ${(diedAt - killedAt).toFixed(0)} ms after the signal): ${inFlightAtKill.size} calls in flight (${onKilled} on b), ` +
        `${failures.length} failed and were retried, ${twice.length} ran twice (${twice.join(', ') || 'none'}); ` +
        `answered by a: ${byReplica.a}, by b: ${byReplica.b}`,
    );
  });
});
