#!/usr/bin/env node
// Replicas behind haproxy (#27): the same load against 1, 2 and 3 `serve --http` replicas
// sharing one redis-server, side by side in one run; and how fast a replica started with an
// empty cache serves a large catalog from the store.
//
//   node scripts/build.mjs --release          # or: cargo build --release --bin anygpt-discovery
//   node bench/replicas.mjs [--clients 40] [--calls 50] [--catalog 5600] [--starts 5] [--changes 10] [--tiny-model] [--binary PATH]
//
// Needs redis-server and haproxy (Debian: `apt-get install -y redis-server haproxy`).
//
// 1. Throughput: for 1, 2, then 3 replicas (each a fresh process with its own HOME and cache,
//    every one connected to its servers first), haproxy in front (round robin, health checks on
//    /readyz, as in __test__/replicas.test.mjs), `--clients` sessionless 2026-07-28 clients
//    (node:http with keep-alive, one POST a call) each making `--calls` calls one after another,
//    all at once: `search_tools`, then `execute_tool` of server-everything's `echo`. p50/p99 per
//    call, calls per second, and the CPU time per call of the replicas' processes (all of them),
//    of haproxy and of the bench's process (every client) (on a machine with fewer cores than replicas + their servers + haproxy +
//    clients, more replicas cannot add throughput: the output says how many cores there are).
// 2. A new replica: a server listing `--catalog` tools of the public catalog is listed by one
//    replica, which writes it to the store; then `--starts` times a replica with an empty
//    cache is spawned and timed: spawn → `/readyz` 200, and spawn → the first `search_tools`
//    whose first result is the catalog tool its words describe. It must not start the server
//    (checked: no child process) nor embed anything (`discovery_semantic_embedded_total`).
//    With `--tiny-model` (a 64-dimension BERT with random weights, __test__/fixtures/tiny-model.mjs)
//    or `ANYGPT_SEARCH_MODEL` naming a model, the semantic tier is on: the first replica embeds
//    the catalog and writes the vectors to the store, the fresh ones read them.
// 3. A change: `--changes` times a tool is added to a server through one replica (the server
//    announces tools/list_changed) and both replicas are searched until they find it.
import { cpus, tmpdir } from 'node:os';
import { mkdtempSync, readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { hostTriple } from '../scripts/host.mjs';
import {
  fixtureEntry,
  metaCall,
  metric,
  readyz,
  replicaConfig,
  startHaproxy,
  startRedis,
  startReplica,
  stopReplica,
  waitReady,
} from '../__test__/cluster.mjs';
import { writeTinyModel } from '../__test__/fixtures/tiny-model.mjs';
import { descendants, eventually, freePort, referenceServer } from '../__test__/helpers.mjs';

const root = join(import.meta.dirname, '..');
const option = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const CLIENTS = Number(option('--clients', 40));
const CALLS = Number(option('--calls', 50));
const CATALOG = Number(option('--catalog', 5600));
const STARTS = Number(option('--starts', 5));
const CHANGES = Number(option('--changes', 10));
const BINARY = option('--binary', join(root, 'target', hostTriple(), 'release/anygpt-discovery'));
const MODEL_ENV = process.argv.includes('--tiny-model')
  ? { ANYGPT_SEARCH_MODEL: writeTinyModel(join(mkdtempSync(join(tmpdir(), 'anygpt-bench-model-')), 'model')) }
  : {};
const NEEDLE = { server: 'catalog', tool: '46elks-sms__send_sms', query: 'Send SMS message via 46elks Swedish telecommunications' };

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** CPU seconds (user + system) `pid` has used so far (0 once it is gone). */
function cpuSeconds(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** A sessionless 2026-07-28 client: node:http with keep-alive, one POST a call, the answer read whole. */
function client(url) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let id = 0;
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'bench-replicas', version: '0' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  return {
    call(name, args) {
      const body = JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name, arguments: args, _meta: meta } });
      return new Promise((resolve, reject) => {
        const req = request(
          url,
          {
            method: 'POST',
            agent,
            headers: {
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'mcp-protocol-version': '2026-07-28',
              'mcp-method': 'tools/call',
              'mcp-name': name,
              'content-length': Buffer.byteLength(body),
            },
          },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (chunk) => (text += chunk));
            res.on('end', () => {
              const json = /^data: (\{.*\})$/m.exec(text)?.[1] ?? text;
              let message = null;
              try {
                message = JSON.parse(json);
              } catch {}
              if (res.statusCode !== 200 || !message?.result || message.result.isError) reject(new Error(`${res.statusCode}: ${text.slice(0, 300)}`));
              else resolve(message.result);
            });
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    },
    close: () => agent.destroy(),
  };
}

const LOADS = {
  search: ['search_tools', { query: 'echo a message' }],
  echo: ['execute_tool', { server: 'everything', tool: 'echo', arguments: { message: 'hi' } }],
};

/** `CLIENTS` loops of `CALLS` calls of `kind` at `url`: latencies, calls/s, CPU ms per call of the replicas and of haproxy. */
async function load(url, kind, replicas, haproxy) {
  const clients = Array.from({ length: CLIENTS }, () => client(url));
  const latencies = [];
  const replicasCpu = () => replicas.reduce((sum, r) => sum + cpuSeconds(r.pid), 0);
  const cpu0 = [replicasCpu(), cpuSeconds(haproxy)];
  const own0 = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    clients.map(async (c) => {
      for (let i = 0; i < CALLS; i++) {
        const t = performance.now();
        await c.call(...LOADS[kind]);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const perCall = (cpu) => ((1000 * cpu) / latencies.length).toFixed(2);
  const own = process.cpuUsage(own0);
  const cpu = {
    replicas: perCall(replicasCpu() - cpu0[0]),
    haproxy: perCall(cpuSeconds(haproxy) - cpu0[1]),
    clients: perCall((own.user + own.system) / 1e6),
  };
  for (const c of clients) c.close();
  latencies.sort((x, y) => x - y);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))].toFixed(1);
  return { p50: at(0.5), p99: at(0.99), perSecond: Math.round(latencies.length / seconds), cpu };
}

/** Poll `probe` every 5 ms until truthy (its value), or null after `ms`. */
const until = (probe, ms) => eventually(probe, ms, 5);

/** Wait until `replica` lists every server connected. */
async function connected(replica) {
  const ok = await until(async () => {
    const { body } = await metaCall(replica.url, 'list_mcp_servers');
    return body?.servers?.every((s) => s.status === 'connected');
  }, 120_000);
  if (!ok) throw new Error(`replica ${replica.name} did not connect its servers`);
}

async function throughput(redis) {
  const rows = [];
  for (const count of [1, 2, 3]) {
    const lbPort = await freePort();
    const config = replicaConfig({
      servers: [referenceServer('everything')],
      storeUrl: redis.url,
      publicUrl: `http://127.0.0.1:${lbPort}/mcp`,
    });
    const replicas = [];
    for (let i = 0; i < count; i++) replicas.push(await startReplica(`r${i + 1}`, config, { binary: BINARY }));
    for (const r of replicas) await waitReady(r.base);
    const lb = await startHaproxy(replicas.map((r) => ({ name: r.name, port: r.port })), lbPort);
    try {
      await lb.waitUp(replicas.map((r) => r.name));
      // Each replica connected to server-everything before the clock starts.
      for (const r of replicas) await metaCall(r.url, 'execute_tool', { server: 'everything', tool: 'echo', arguments: { message: 'warm' } });
      for (const r of replicas) await connected(r);
      for (const kind of ['search', 'echo']) {
        const r = await load(lb.url, kind, replicas, lb.child.pid);
        const line = `| ${count} | ${kind} | ${r.p50} | ${r.p99} | ${r.perSecond} | ${r.cpu.replicas} | ${r.cpu.haproxy} | ${r.cpu.clients} |`;
        console.error(line);
        rows.push(line);
      }
    } finally {
      await lb.stop();
      for (const r of replicas) await stopReplica(r);
    }
  }
  return rows;
}

async function newReplica(redis) {
  const config = replicaConfig({
    servers: [fixtureEntry('catalog', { catalog: CATALOG })],
    storeUrl: redis.url,
    publicUrl: 'http://127.0.0.1:1/mcp',
  });
  // One replica lists the catalog (and embeds it, with a model) and so writes it to the store.
  const seed = await startReplica('seed', config, { binary: BINARY, env: MODEL_ENV });
  await waitReady(seed.base);
  await connected(seed);
  await until(async () => {
    const { body } = await metaCall(seed.url, 'search_tools', { query: NEEDLE.query });
    return body?.results?.[0]?.tool === NEEDLE.tool && body.vectorsPending === undefined;
  }, 1_800_000);
  const semantic = (await metaCall(seed.url, 'list_mcp_servers')).body.semanticSearch ?? 'no model';
  const seedEmbedded = await metric(seed.base, 'discovery_semantic_embedded_total');
  await stopReplica(seed);
  const runs = [];
  for (let i = 0; i < STARTS; i++) {
    const fresh = await startReplica(`fresh${i}`, config, { binary: BINARY, env: MODEL_ENV });
    try {
      await until(async () => (await readyz(fresh.base)).status === 200, 60_000);
      const readyMs = performance.now() - fresh.spawnedAt;
      let pending = 0;
      const hit = await until(async () => {
        const { body } = await metaCall(fresh.url, 'search_tools', { query: NEEDLE.query });
        pending = body?.vectorsPending ?? 0;
        return body?.results?.[0]?.server === NEEDLE.server && body.results[0].tool === NEEDLE.tool;
      }, 60_000);
      const hitMs = performance.now() - fresh.spawnedAt;
      if (!hit) throw new Error('the fresh replica never found the catalog tool');
      // Then every vector in place (read from the store, none embedded): the semantic tier whole.
      await until(async () => (await metaCall(fresh.url, 'search_tools', { query: NEEDLE.query })).body?.vectorsPending === undefined, 120_000);
      const vectorsMs = performance.now() - fresh.spawnedAt;
      const started = descendants(fresh.pid).length;
      const embedded = await metric(fresh.base, 'discovery_semantic_embedded_total');
      runs.push({ readyMs, hitMs, vectorsMs, started, embedded, pending });
      console.error(
        `fresh replica ${i + 1}: spawn → ready ${readyMs.toFixed(0)} ms, spawn → first hit ${hitMs.toFixed(0)} ms (vectors pending then: ${pending}), ` +
          `spawn → no vector pending ${vectorsMs.toFixed(0)} ms, ${started} server processes, embedded ${embedded ?? '-'}`,
      );
    } finally {
      await stopReplica(fresh);
    }
  }
  const median = (key) => {
    const values = runs.map((r) => r[key]).sort((x, y) => x - y);
    return values[Math.floor(values.length / 2)].toFixed(0);
  };
  return { runs, seedEmbedded, semantic, readyMs: median('readyMs'), hitMs: median('hitMs'), vectorsMs: median('vectorsMs') };
}

/**
 * A tool list changed on one replica, searched on another: `--changes` times, a tool added to
 * the fixture server through replica 1 (its server announces tools/list_changed), then replica
 * 2 searched every 5 ms until it finds it. Milliseconds from the add's answer to the find.
 */
async function propagation(redis) {
  const dir = mkdtempSync(join(tmpdir(), 'anygpt-bench-replicas-'));
  const config = replicaConfig({
    servers: [fixtureEntry('fixture', { record: join(dir, 'record'), added: join(dir, 'added') })],
    storeUrl: redis.url,
    publicUrl: 'http://127.0.0.1:1/mcp',
  });
  const one = await startReplica('one', config, { binary: BINARY });
  const two = await startReplica('two', config, { binary: BINARY });
  try {
    for (const r of [one, two]) {
      await waitReady(r.base);
      await connected(r);
    }
    const times = { one: [], two: [] };
    for (let i = 0; i < CHANGES; i++) {
      // Apart by more than the engine's least interval between two listings of a server (500 ms).
      await sleep(600);
      const name = `quokkaledger${i}x${process.pid}`;
      await metaCall(one.url, 'execute_tool', { server: 'fixture', tool: 'add_tool', arguments: { name } });
      const at = performance.now();
      await Promise.all(
        [one, two].map(async (replica) => {
          const seen = await until(async () => {
            const { body } = await metaCall(replica.url, 'search_tools', { query: name });
            return body?.results?.some((r) => r.tool === name);
          }, 30_000);
          if (!seen) throw new Error(`replica ${replica.name} never found ${name}`);
          times[replica.name].push(performance.now() - at);
        }),
      );
    }
    const summary = (list) => {
      list.sort((x, y) => x - y);
      return { median: list[Math.floor(list.length / 2)].toFixed(0), max: list.at(-1).toFixed(0) };
    };
    return { one: summary(times.one), two: summary(times.two) };
  } finally {
    await stopReplica(one);
    await stopReplica(two);
  }
}

async function main() {
  const redis = await startRedis();
  try {
    const rows = await throughput(redis);
    const fresh = await newReplica(redis);
    const changes = await propagation(redis);
    console.log(`binary: ${BINARY}; ${cpus().length} cores; redis-server and haproxy from the system`);
    console.log(`${CLIENTS} sessionless clients × ${CALLS} calls each through haproxy; CPU time per call of the replicas' processes (all, not their servers), of haproxy, and of this process (every client)\n`);
    console.log('| replicas | call | p50 ms | p99 ms | calls/s | replicas CPU ms/call | haproxy CPU ms/call | clients CPU ms/call |');
    console.log('|---|---|---|---|---|---|---|---|');
    console.log(rows.join('\n'));
    console.log('');
    console.log(
      `A replica with an empty cache, ${CATALOG}-tool catalog in the store, semantic tier ${fresh.semantic} (median of ${fresh.runs.length}): ` +
        `spawn → /readyz 200 ${fresh.readyMs} ms, spawn → first correct search_tools hit ${fresh.hitMs} ms; ` +
        `server processes started: ${Math.max(...fresh.runs.map((r) => r.started))}; ` +
        `tool vectors still pending at the first hit: ${Math.max(...fresh.runs.map((r) => r.pending))}, ` +
        `spawn → no vector pending ${fresh.vectorsMs} ms; ` +
        `texts embedded: ${fresh.runs.map((r) => r.embedded ?? '-').join(', ')} (the replica that listed the catalog: ${fresh.seedEmbedded ?? '-'})`,
    );
    console.log(
      `A tool added through one replica (its server announcing tools/list_changed), found by search_tools (${CHANGES} changes, ms after the add answered): ` +
        `on that replica median ${changes.one.median}, at most ${changes.one.max}; on another replica median ${changes.two.median}, at most ${changes.two.max}`,
    );
  } finally {
    await redis.stop();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
