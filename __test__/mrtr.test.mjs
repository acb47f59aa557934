// Multi-round-trip requests (SEP-2322, protocol 2026-07-28): a downstream server answers
// `tools/call` with an input-required result; the requests it embeds reach the gateway's own
// client (the official SDK client here) as forwarded requests do, and the call goes again with
// the answers and the server's `requestState` echoed — bounded in rounds and in time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { startMrtrServer } from './fixtures/mrtr-server.mjs';
import { bin, isolatedEnv, writeConfig } from './helpers.mjs';

/** The gateway in front of the fixture at `url`, with a client declaring `capabilities`. */
async function gatewayWith(url, capabilities, handlers = {}) {
  const config = writeConfig({ discovery: { servers: [{ name: 'mrtr', connection: { type: 'http', url } }] } });
  const transport = new StdioClientTransport({ command: process.execPath, args: [bin, '--config', config], env: isolatedEnv(), stderr: 'pipe' });
  const client = new Client({ name: 'mrtr-test', version: '0.0.0' }, { capabilities });
  if (handlers.elicit) client.setRequestHandler(ElicitRequestSchema, handlers.elicit);
  if (handlers.sample) client.setRequestHandler(CreateMessageRequestSchema, handlers.sample);
  await client.connect(transport);
  return client;
}

async function run(client, tool, extra = {}) {
  const result = await client.callTool(
    { name: 'execute_tool', arguments: { server: 'mrtr', tool, arguments: {}, ...extra } },
    undefined,
    { timeout: 30_000 },
  );
  return { result, text: result.content.map((c) => c.text ?? '').join('\n') };
}

/** A fixture, a gateway in front of it, and both closed after `body`. */
async function withGateway(options, capabilities, handlers, body) {
  const server = await startMrtrServer(options);
  const client = await gatewayWith(server.url, capabilities, handlers);
  try {
    await body(client, server);
  } finally {
    await client.close();
    await server.close();
  }
}

test('an embedded elicitation reaches the client and the call goes again with the state echoed', async () => {
  const asked = [];
  const elicit = async (request) => {
    asked.push(request.params.message);
    return { action: 'accept', content: { answer: 'yes' } };
  };
  await withGateway({}, { elicitation: {} }, { elicit }, async (client, server) => {
    const { result, text } = await run(client, 'confirm');
    assert.equal(result.isError, undefined, text);
    assert.equal(text, 'confirmed with {"action":"accept","content":{"answer":"yes"}}');
    assert.deepEqual(asked, ['[server mrtr asks] Really do it?'], 'the person sees which server asks');
    const rounds = server.calls.filter((c) => c.name === 'confirm');
    assert.equal(rounds.length, 2);
    assert.equal(rounds[0].requestState, undefined);
    assert.equal(rounds[0].inputResponses, undefined);
    assert.notEqual(rounds[1].id, rounds[0].id, 'a retry is a new JSON-RPC request');
  });
});

test('several rounds in one call, each answered, the newest state echoed each time', async () => {
  const answers = { '[server mrtr asks] Your name?': 'Ada', '[server mrtr asks] Your favourite colour?': 'green' };
  const elicit = async (request) => ({ action: 'accept', content: { answer: answers[request.params.message] } });
  await withGateway({}, { elicitation: {} }, { elicit }, async (client, server) => {
    const { result, text } = await run(client, 'two_questions');
    assert.equal(result.isError, undefined, text);
    assert.equal(text, 'Ada likes green');
    assert.deepEqual(
      server.calls.map((c) => c.requestState),
      [undefined, 'round-1', 'round-2:Ada'],
    );
  });
});

test('an embedded sampling request is answered by a client that declared sampling', async () => {
  const sample = async () => ({ role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'test-model' });
  await withGateway({}, { sampling: {} }, { sample }, async (client) => {
    const { result, text } = await run(client, 'ask_model');
    assert.equal(result.isError, undefined, text);
    assert.equal(text, 'the model said Paris');
  });
});

test('an embedded request the client did not declare ends the call with the reason', async () => {
  await withGateway({}, { elicitation: {} }, { elicit: async () => ({ action: 'decline' }) }, async (client, server) => {
    const { result, text } = await run(client, 'ask_model');
    assert.equal(result.isError, true);
    const { error } = JSON.parse(text);
    assert.equal(error.code, 'TOOL_EXECUTION_ERROR');
    assert.match(error.message, /needs sampling from the gateway's client/);
    assert.match(error.message, /does not support sampling \(it did not declare the capability\)/);
    assert.equal(server.calls.length, 1, 'no retry without the answer');
  });
});

test('a server that keeps asking gets a clear error after ten rounds', async () => {
  await withGateway({}, { elicitation: {} }, {}, async (client, server) => {
    const { result, text } = await run(client, 'forever');
    assert.equal(result.isError, true);
    const { error } = JSON.parse(text);
    assert.equal(error.code, 'TOOL_EXECUTION_ERROR');
    assert.match(error.message, /asked for more input 10 times in one call/);
    assert.equal(server.calls.length, 10);
    // Each retry echoes the state the round before it handed out.
    for (let i = 1; i < server.calls.length; i += 1) assert.equal(server.calls[i].requestState, `again-${i}`);
  });
});

test('more embedded requests in one round than the gateway answers is refused without asking anyone', async () => {
  let asked = 0;
  const elicit = async () => {
    asked += 1;
    return { action: 'decline' };
  };
  await withGateway({}, { elicitation: {} }, { elicit }, async (client) => {
    const { result, text } = await run(client, 'many');
    assert.equal(result.isError, true);
    assert.match(JSON.parse(text).error.message, /asked for 17 inputs in one round .* at most 16/);
    assert.equal(asked, 0);
  });
});

test('the call timeout covers the rounds, the client answering included', async () => {
  const elicit = () => new Promise((resolve) => setTimeout(() => resolve({ action: 'accept', content: { answer: 'late' } }), 5000));
  await withGateway({}, { elicitation: {} }, { elicit }, async (client) => {
    const started = Date.now();
    const { result, text } = await run(client, 'confirm', { timeoutMs: 800 });
    assert.equal(result.isError, true, text);
    assert.equal(JSON.parse(text).error.code, 'TOOL_EXECUTION_TIMEOUT');
    assert.ok(Date.now() - started < 4000, `answered after ${Date.now() - started} ms`);
  });
});

test('an input-required result on a protocol before 2026-07-28 is a protocol error', async () => {
  await withGateway({ legacy: true }, { elicitation: {} }, { elicit: async () => ({ action: 'accept', content: {} }) }, async (client, server) => {
    const { result, text } = await run(client, 'confirm');
    assert.equal(result.isError, true);
    assert.match(JSON.parse(text).error.message, /input-required result \(SEP-2322\), which its protocol version 2025-11-25 does not have/);
    assert.equal(server.calls.length, 1);
  });
});
