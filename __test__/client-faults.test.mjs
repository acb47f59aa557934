// Clients on a bad day, and downstream texts no client can take in one message: the gateway
// (npm bin and native binary) driven over raw stdio lines or by the official SDK client.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { hostTriple } from '../scripts/host.mjs';
import {
  alive, call, isolatedEnv, rawGateway, root, serverPaths, spawnGateway, startGateway, writeConfig,
} from './helpers.mjs';

const hugeText = join(root, '__test__/fixtures/huge-text-server.mjs');
const faults = join(root, '__test__/fixtures/fault-server.mjs');
const native = join(root, 'target', hostTriple(), 'debug/anygpt-discovery');
const emptyConfig = () => writeConfig({ discovery: { servers: [] } });

/** The same gateway through the npm bin and the native binary. */
const faces = [
  ['npm bin', (args) => rawGateway(args)],
  ['native binary', (args) => rawGateway(args, { command: native })],
];

const deep = `${'['.repeat(300)}${']'.repeat(300)}`;
/** [what, raw line, expected id, expected code]; each line is a request the client waits on. */
const malformed = [
  ['a lone surrogate', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"\\ud800"}}}', 1, -32700],
  ['a number out of range', '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"x","limit":1e999}}}', 2, -32700],
  ['nesting past 128 levels', `{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"search_tools","arguments":{"query":${deep}}}}`, 'three', -32700],
  ['params a string', '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"search_tools"}', 4, -32602],
  ['name a number', '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":5,"arguments":{}}}', 5, -32602],
  ['id after the bad part', '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"\\udfff"},"id":6}', 6, -32700],
  ['no id to recover', '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"\\ud800"}', undefined, -32700],
];

describe('malformed client requests', () => {
  for (const [face, start] of faces) {
    test(`${face}: each gets one JSON-RPC error for its id, and the session goes on`, async () => {
      const gateway = start(['--config', emptyConfig()]);
      try {
        assert.equal((await gateway.initialize()).id, 0);
        for (const [what, line, id, code] of malformed) {
          gateway.send(line);
          const answer = await gateway.next();
          assert.equal(answer.id, id, what);
          assert.equal(answer.error?.code, code, `${what}: ${JSON.stringify(answer)}`);
          assert.ok(answer.error.message.length < 1024, what);
        }
        gateway.send({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'list_mcp_servers', arguments: {} } });
        const answer = await gateway.next();
        assert.equal(answer.id, 7);
        assert.deepEqual(JSON.parse(answer.result.content[0].text).servers, []);
      } finally {
        gateway.child.kill();
      }
    });
  }

  test('a line over 16 MiB is answered for the id in its first bytes', async () => {
    const gateway = rawGateway(['--config', emptyConfig()]);
    try {
      await gateway.initialize();
      const filler = 'x'.repeat(17 * 1024 * 1024);
      gateway.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"${filler}"}}}`);
      const answer = await gateway.next();
      assert.deepEqual([answer.id, answer.error.code], [8, -32600]);
      assert.match(answer.error.message, /longer than 16777216 bytes/);
    } finally {
      gateway.child.kill();
    }
  });
});

describe('downstream texts over the client limit (10 MiB in the official client)', () => {
  test('a 12 MiB tool description is cut in every answer; the session goes on', async () => {
    const gateway = await startGateway(writeConfig({
      discovery: { servers: [{ name: 'huge', connection: { command: process.execPath, args: [hugeText] } }] },
    }));
    try {
      const { body: details } = await call(gateway.client, 'get_tool_details', { server: 'huge', tool: 'wordy' });
      assert.ok(details.description.length < 16 * 1024, `${details.description.length} chars`);
      assert.match(details.description, /\[anygpt-discovery: cut at 8192 of 12582912 bytes\]$/);
      const { body: listed } = await call(gateway.client, 'list_tools', { server: 'huge' });
      assert.ok(JSON.stringify(listed).length < 64 * 1024);
      const { body: found } = await call(gateway.client, 'search_tools', { query: 'huge text' });
      assert.ok(JSON.stringify(found).length < 64 * 1024);
      const echoed = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'huge', tool: 'echo', arguments: { message: 'still here' } } });
      assert.equal(echoed.content[0].text, 'echo: still here');
    } finally {
      await gateway.client.close();
    }
  });

  test('a 12 MiB error message is a bounded TOOL_EXECUTION_ERROR; the session goes on', async () => {
    const gateway = await startGateway(writeConfig({
      discovery: { servers: [{ name: 'huge', connection: { command: process.execPath, args: [hugeText] } }] },
    }));
    try {
      const { result, body } = await call(gateway.client, 'execute_tool', { server: 'huge', tool: 'fail' });
      assert.equal(result.isError, true);
      assert.equal(body.error.code, 'TOOL_EXECUTION_ERROR');
      assert.ok(result.content[0].text.length < 16 * 1024, `${result.content[0].text.length} chars`);
      const echoed = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'huge', tool: 'echo', arguments: { message: 'after' } } });
      assert.equal(echoed.content[0].text, 'echo: after');
    } finally {
      await gateway.client.close();
    }
  });

  test('a 20 MiB tool list and a 20 MiB error message do not end the session', async () => {
    // Lines over 16 MiB from a server are dropped on the way in (the upstream transport's
    // limit), but for a page of tools (read up to 64 MiB): the 20 MiB list arrives and its
    // description is cut, the 20 MiB error does not and the call times out. What counts here
    // is that the client's session survives and every answer stays bounded.
    const gateway = await startGateway(writeConfig({
      discovery: {
        servers: [
          { name: 'wordy', startupTimeoutMs: 2000, connection: { command: process.execPath, args: [hugeText, '--description-mib', '20'] } },
          { name: 'failing', timeoutMs: 2000, connection: { command: process.execPath, args: [hugeText, '--description-mib', '0', '--error-mib', '20'] } },
        ],
      },
    }));
    try {
      const { result: listed } = await call(gateway.client, 'list_mcp_servers');
      assert.ok(listed.content[0].text.length < 64 * 1024);
      const failed = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'failing', tool: 'fail' } });
      assert.equal(failed.isError, true);
      assert.ok(failed.content[0].text.length < 16 * 1024, `${failed.content[0].text.length} chars`);
      const echoed = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'failing', tool: 'echo', arguments: { message: 'after' } } });
      assert.equal(echoed.content[0].text, 'echo: after');
    } finally {
      await gateway.client.close();
    }
  });

  test('a 20 MiB stderr line of a server that dies at start does not end the session', async () => {
    const gateway = await startGateway(writeConfig({
      discovery: {
        servers: [
          { name: 'loud', connection: { command: process.execPath, args: [hugeText, '--stderr-mib', '20'] } },
          { name: 'quiet', connection: { command: process.execPath, args: [hugeText, '--description-mib', '0'] } },
        ],
      },
    }));
    try {
      const { result } = await call(gateway.client, 'list_mcp_servers');
      assert.ok(result.content[0].text.length < 64 * 1024, `${result.content[0].text.length} chars`);
      const failed = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'loud', tool: 'echo' } });
      assert.equal(failed.isError, true);
      assert.ok(failed.content[0].text.length < 16 * 1024, `${failed.content[0].text.length} chars`);
      const echoed = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'quiet', tool: 'echo', arguments: { message: 'alive' } } });
      assert.equal(echoed.content[0].text, 'echo: alive');
    } finally {
      await gateway.client.close();
    }
  });
});

describe('stdin EOF with a call in flight', () => {
  test('a script that pipes requests in and closes stdin still reads every answer', async () => {
    const gateway = rawGateway(['--config', emptyConfig()]);
    gateway.send({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pipe', version: '0' } } });
    gateway.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    gateway.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'search_tools', arguments: { query: 'anything' } } });
    gateway.send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":"x"}');
    gateway.child.stdin.end();
    const answers = [await gateway.next(), await gateway.next(), await gateway.next()];
    assert.deepEqual(answers.map((a) => a.id).sort(), [0, 1, 2]);
    assert.equal(answers.find((a) => a.id === 1).result.isError, false);
    assert.equal(await gateway.exit, 0);
  });


  for (const [face, command] of [['npm bin', process.execPath], ['native binary', native]]) {
    test(`${face}: exits 0 within 1 s, the call cancelled and the server gone`, async () => {
      const config = writeConfig({
        discovery: { servers: [{ name: 'fault', connection: { command: process.execPath, args: [faults] } }] },
      });
      const gateway = await spawnGateway(['--config', config], { command });
      const pids = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'fault', tool: 'pids' } });
      const server = JSON.parse(pids.content[0].text).server;
      const hung = gateway.client
        .callTool({ name: 'execute_tool', arguments: { server: 'fault', tool: 'hang' } })
        .catch((error) => error);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const started = performance.now();
      gateway.child.stdin.end();
      const code = await gateway.exit;
      const elapsed = performance.now() - started;
      assert.equal(code, 0);
      assert.ok(elapsed < 1000, `exited ${Math.round(elapsed)} ms after EOF`);
      assert.equal(alive(server), false);
      await hung;
    });
  }
});

describe('a request cancelled at once', () => {
  /** The gateway over one fault server, with every message the client sends recorded. */
  async function recordedGateway() {
    const gateway = await startGateway(writeConfig({
      discovery: { servers: [{ name: 'fault', connection: { command: process.execPath, args: [faults, '--slow-tool'] } }] },
    }));
    const sent = [];
    const send = gateway.transport.send.bind(gateway.transport);
    gateway.transport.send = (message, options) => {
      sent.push(message);
      return send(message, options);
    };
    const errors = [];
    gateway.client.onerror = (error) => errors.push(error);
    return { ...gateway, sent, errors };
  }

  const execute = (client, tool, args, options) =>
    client.callTool({ name: 'execute_tool', arguments: { server: 'fault', tool, arguments: args } }, undefined, options);

  /**
   * `execute_tool` aborted once `ready()` resolves (at once by default: in the tick it is
   * sent), then searches and listings sent together.
   */
  async function cancelled(gateway, tool, args, ready = () => {}) {
    const controller = new AbortController();
    const call_ = execute(gateway.client, tool, args, { signal: controller.signal }).then(
      (result) => ({ result }),
      (error) => ({ error }),
    );
    await ready();
    controller.abort(new Error('changed my mind'));
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2
      ? call(gateway.client, 'list_tools', { server: 'fault' })
      : call(gateway.client, 'search_tools', { query: 'echo a message back' }))));
    const elapsed = performance.now() - started;
    const outcome = await call_;
    assert.match(String(outcome.error), /changed my mind/, JSON.stringify(outcome.result));
    // The request went out, and its cancellation after it.
    const at = gateway.sent.findIndex((m) => m.method === 'tools/call' && m.params.arguments.tool === tool);
    assert.ok(at >= 0, 'the execute_tool request was sent');
    const cancel = gateway.sent.find((m) => m.method === 'notifications/cancelled');
    assert.equal(cancel?.params.requestId, gateway.sent[at].id);
    return { answers, elapsed };
  }

  const counts = async (client) => JSON.parse((await execute(client, 'count', {})).content[0].text);

  /** What the fault server recorded, once `done(events)` holds (or after ~2 s). */
  async function serverEvents(client, done) {
    let events = [];
    for (let i = 0; i < 40 && !done(events); i++) {
      events = JSON.parse((await execute(client, 'events', {})).content[0].text);
      if (!done(events)) await new Promise((r) => setTimeout(r, 50));
    }
    return events;
  }

  /** Each search found the fault server's `echo`, each listing its tools, none held up. */
  function assertAnswered({ answers, elapsed }) {
    assert.ok(elapsed < 2000, `searches and listings took ${Math.round(elapsed)} ms`);
    answers.forEach(({ result, body }, i) => {
      assert.equal(result.isError, false, JSON.stringify(body));
      if (i % 2) assert.ok(body.tools.some((t) => t.name === 'hang'), JSON.stringify(body).slice(0, 300));
      else assert.deepEqual([body.results[0].server, body.results[0].tool], ['fault', 'echo']);
    });
  }

  test('cancelled in the tick it is sent: searches go on, nothing stuck, the next call works', async () => {
    const gateway = await recordedGateway();
    try {
      assert.equal((await execute(gateway.client, 'echo', { message: 'warm' })).content[0].text, 'Echo: warm');
      assertAnswered(await cancelled(gateway, 'hang', {}));
      const at = gateway.sent.findIndex((m) => m.method === 'tools/call' && m.params.arguments.tool === 'hang');
      assert.equal(gateway.sent[at + 1]?.method, 'notifications/cancelled', 'the cancellation right behind the call');
      // Either the gateway dropped the call before sending it on, or the server got it and
      // its cancellation after it: nothing may be left waiting.
      if ((await counts(gateway.client)).hang) {
        const events = await serverEvents(gateway.client, (e) => e.includes('hang:cancelled'));
        assert.ok(events.includes('hang:cancelled'), `server events: ${events}`);
      }
      const after = await execute(gateway.client, 'echo', { message: 'after' });
      assert.equal(after.content[0].text, 'Echo: after');
      const { body } = await call(gateway.client, 'list_mcp_servers');
      assert.equal(body.servers[0].status, 'connected', JSON.stringify(body.servers[0]));
      assert.deepEqual(gateway.errors, []);
    } finally {
      await gateway.client.close();
    }
  });

  test('a server deaf to the cancellation answers late: dropped, and the session goes on', async () => {
    const gateway = await recordedGateway();
    try {
      assert.equal((await execute(gateway.client, 'echo', { message: 'warm' })).content[0].text, 'Echo: warm');
      const received = async () => {
        for (let i = 0; i < 100 && !(await counts(gateway.client)).slow; i++) await new Promise((r) => setTimeout(r, 10));
      };
      assertAnswered(await cancelled(gateway, 'slow', { ms: 400 }, received));
      // Calls to the same server meanwhile are answered, not queued behind the deaf one.
      const during = await execute(gateway.client, 'echo', { message: 'during' });
      assert.equal(during.content[0].text, 'Echo: during');
      const events = await serverEvents(gateway.client, (e) => e.some((x) => x.startsWith('slow:answered')));
      assert.deepEqual(events, ['slow:answered after cancel']);
      const after = await execute(gateway.client, 'slow', { ms: 10 });
      assert.equal(after.content[0].text, 'slow done after 10 ms');
      // The late answer never reached the client (the SDK reports one for an unknown id).
      assert.deepEqual(gateway.errors, []);
    } finally {
      await gateway.client.close();
    }
  });
});

describe('a cancelled request over raw lines (JSON-RPC ids the client chooses)', () => {
  for (const [face, start] of faces) {
    test(`${face}: no answer for the cancelled id, its call cancelled downstream, the id free again`, async () => {
      const config = writeConfig({
        discovery: { servers: [{ name: 'fault', connection: { command: process.execPath, args: [faults, '--slow-tool'] } }] },
      });
      const gateway = start(['--config', config]);
      const execute = (id, tool, args = {}) => gateway.send({
        jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_tool', arguments: { server: 'fault', tool, arguments: args } },
      });
      const cancel = (id) => gateway.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'changed my mind' } });
      const textOf = (answer) => answer.result.content[0].text;
      try {
        await gateway.initialize();
        execute(1, 'echo', { message: 'warm' });
        assert.equal(textOf(await gateway.next(30_000)), 'Echo: warm');

        // A call the server answers only when cancelled, cancelled once it reached the server.
        execute(5, 'hang');
        await new Promise((r) => setTimeout(r, 300));
        cancel(5);
        // The same id at once, for a call that answers.
        execute(5, 'echo', { message: 'again' });
        const reused = await gateway.next();
        assert.equal(reused.id, 5);
        assert.equal(textOf(reused), 'Echo: again', JSON.stringify(reused));

        // One deaf to cancellation answers late; its id is reused while it still runs.
        execute(7, 'slow', { ms: 300 });
        await new Promise((r) => setTimeout(r, 100));
        cancel(7);
        execute(7, 'slow', { ms: 600 });
        const late = await gateway.next();
        assert.equal(late.id, 7);
        assert.equal(textOf(late), 'slow done after 600 ms', 'the answer is the second request\'s, not the cancelled one\'s');

        // The hang was cancelled downstream; nothing else was ever written for ids 5 or 7.
        let events = [];
        for (let i = 0; i < 40 && !events.includes('hang:cancelled'); i++) {
          execute(100 + i, 'events');
          events = JSON.parse(textOf(await gateway.next()));
        }
        assert.ok(events.includes('hang:cancelled'), JSON.stringify(events));
        await assert.rejects(gateway.next(700), /no answer within/, 'a cancelled request got an answer');
      } finally {
        gateway.child.kill();
      }
    });
  }
});

describe('a client that never reads stderr', () => {
  test('a server flooding its stderr into debug logs does not stall the gateway', async () => {
    // 2 MB of stderr lines, then the memory server: logged at debug, line by line.
    const flood = `for (let i = 0; i < 20000; i++) process.stderr.write('noise ' + i + ' ' + 'x'.repeat(90) + '\\n');
      await import(${JSON.stringify(pathToFileURL(serverPaths.memory).href)});`;
    const config = writeConfig({
      discovery: { servers: [{ name: 'memory', connection: { command: process.execPath, args: ['--input-type=module', '-e', flood] } }] },
    });
    // stderr is a pipe nobody reads: it fills after 64 KiB.
    const transport = new StdioClientTransport({
      command: native,
      args: ['--config', config, '--log-level', 'downstream=debug,warn'],
      env: isolatedEnv(),
      stderr: 'pipe',
    });
    const client = new Client({ name: 'deaf-to-stderr', version: '0.0.0' });
    await client.connect(transport);
    try {
      const found = await call(client, 'search_tools', { query: 'read the knowledge graph', limit: 3 });
      assert.ok(found.body.results.some((r) => r.tool === 'read_graph'), JSON.stringify(found.body));
      const graph = await call(client, 'execute_tool', { server: 'memory', tool: 'read_graph', arguments: {} });
      assert.notEqual(graph.result.isError, true, JSON.stringify(graph.result));
    } finally {
      // The child's 'close' waits for its stderr to be read to the end.
      transport.stderr?.resume();
      await client.close();
    }
  });
});
