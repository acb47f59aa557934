// Calls that ask their client something, for a 2026-07-28 client over `serve --http` (SEP-2322
// multi-round-trip requests): a downstream server's elicitation and the gateway's own
// confirmation come back as input-required results with a sealed `requestState`; the retry
// with the answer in `inputResponses` continues the same call. A state that is tampered with,
// used twice or sent with other arguments continues nothing.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { answerOf, raw2026, referenceServer, root, serveHttp, tempDir } from './helpers.mjs';

const ELICITING = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } } };

const asking = { name: 'asking', connection: { command: process.execPath, args: [join(root, '__test__/fixtures/asking-server.mjs')] } };

/** One `tools/call` of `execute_tool` as a 2026-07-28 client makes it; its JSON-RPC answer. */
async function execute(url, server, tool, args, more = {}) {
  const params = { name: 'execute_tool', arguments: { server, tool, arguments: args }, _meta: ELICITING, ...more };
  return answerOf(await raw2026(url, 'tools/call', params));
}

/** The one question of an input-required result: its key, the request, the state. */
function question(answer) {
  assert.equal(answer.result?.resultType, 'input_required', JSON.stringify(answer));
  const keys = Object.keys(answer.result.inputRequests);
  assert.equal(keys.length, 1, JSON.stringify(answer.result));
  return { key: keys[0], request: answer.result.inputRequests[keys[0]], state: answer.result.requestState };
}

describe('2026-07-28: questions during a call travel as input-required rounds', () => {
  let gateway;
  before(async () => {
    const memory = referenceServer('memory');
    // Its own graph file: the package's default one outlives the test.
    memory.connection.env = { MEMORY_FILE_PATH: join(tempDir(), 'memory.jsonl') };
    gateway = await serveHttp([asking, memory], {
      discovery: { toolRules: [{ server: 'memory', pattern: 'create_entities', confirm: true }] },
    });
  });
  after(async () => {
    gateway.child.kill('SIGTERM');
    await gateway.exit;
  });

  test("a server's elicitation comes back as a round, and the answer reaches the server", async () => {
    const first = await execute(gateway.url, 'asking', 'ask_person', { message: 'Deploy now?' });
    const { key, request, state } = question(first);
    assert.equal(request.method, 'elicitation/create');
    assert.equal(request.params.message, '[server asking asks] Deploy now?', 'the person sees which server asks');
    assert.ok(state, 'a requestState to echo');
    const answered = { [key]: { action: 'accept', content: { answer: 'yes' } } };
    const done = await execute(gateway.url, 'asking', 'ask_person', { message: 'Deploy now?' }, { inputResponses: answered, requestState: state });
    assert.equal(done.result?.resultType ?? 'complete', 'complete', JSON.stringify(done));
    const body = JSON.parse(done.result.content[0].text);
    assert.deepEqual(body.answer, { action: 'accept', content: { answer: 'yes' } }, 'the server got the answer');

    // The state was used: sending it again continues nothing.
    const replayed = await execute(gateway.url, 'asking', 'ask_person', { message: 'Deploy now?' }, { inputResponses: answered, requestState: state });
    assert.equal(replayed.error?.code, -32602, JSON.stringify(replayed));
    assert.match(replayed.error.message, /no call waits under this requestState: it was answered already/);
  });

  test('a state sent with other arguments, or tampered with, continues nothing; the right one still does', async () => {
    const first = await execute(gateway.url, 'asking', 'ask_person', { message: 'Pay $5?' });
    const { key, state } = question(first);
    const answered = { [key]: { action: 'accept', content: { answer: 'ok' } } };
    const other = await execute(gateway.url, 'asking', 'ask_person', { message: 'Pay $5000?' }, { inputResponses: answered, requestState: state });
    assert.equal(other.error?.code, -32602, JSON.stringify(other));
    assert.match(other.error.message, /requestState is not one this gateway gave for this caller and these arguments/);
    const flipped = state.slice(0, -2) + (state.at(-2) === 'A' ? 'B' : 'A') + state.at(-1);
    const tampered = await execute(gateway.url, 'asking', 'ask_person', { message: 'Pay $5?' }, { inputResponses: answered, requestState: flipped });
    assert.equal(tampered.error?.code, -32602, JSON.stringify(tampered));
    // Neither attempt used up the call: the genuine retry goes through.
    const done = await execute(gateway.url, 'asking', 'ask_person', { message: 'Pay $5?' }, { inputResponses: answered, requestState: state });
    assert.deepEqual(JSON.parse(done.result.content[0].text).answer, { action: 'accept', content: { answer: 'ok' } });
  });

  test('confirmation: decline → the server never sees the call; accept → it runs', async () => {
    const args = { entities: [{ name: 'rounds-test', entityType: 'note', observations: ['x'] }] };
    const read = async () => {
      const graph = await execute(gateway.url, 'memory', 'read_graph', {});
      return JSON.parse(graph.result.content[0].text).entities.map((e) => e.name);
    };
    const asked = question(await execute(gateway.url, 'memory', 'create_entities', args));
    assert.equal(asked.request.method, 'elicitation/create');
    assert.match(asked.request.params.message, /^Allow the call of tool `create_entities` on server `memory`\?/);
    const declined = await execute(gateway.url, 'memory', 'create_entities', args, {
      inputResponses: { [asked.key]: { action: 'decline' } },
      requestState: asked.state,
    });
    assert.equal(declined.result.isError, true, JSON.stringify(declined));
    assert.match(declined.result.content[0].text, /TOOL_NOT_CONFIRMED/);
    assert.ok(!(await read()).includes('rounds-test'), 'declined: the server never saw the call');

    const again = question(await execute(gateway.url, 'memory', 'create_entities', args));
    const accepted = await execute(gateway.url, 'memory', 'create_entities', args, {
      inputResponses: { [again.key]: { action: 'accept', content: {} } },
      requestState: again.state,
    });
    assert.ok(!accepted.result.isError, JSON.stringify(accepted));
    assert.ok((await read()).includes('rounds-test'), 'accepted: the call ran');
  });

  test('a client that does not declare elicitation is refused with the documented message, not asked', async () => {
    const params = {
      name: 'execute_tool',
      arguments: { server: 'memory', tool: 'create_entities', arguments: { entities: [] } },
      _meta: { 'io.modelcontextprotocol/clientCapabilities': {} },
    };
    const refused = await answerOf(await raw2026(gateway.url, 'tools/call', params));
    assert.equal(refused.result.isError, true, JSON.stringify(refused));
    assert.match(refused.result.content[0].text, /needs the user's confirmation \(toolRules `confirm: true`\) and nobody can be asked here/);
  });

  test('requestState on a call that never asked is an error', async () => {
    const params = { name: 'search_tools', arguments: { query: 'graph' }, requestState: 'made-up' };
    const answer = await answerOf(await raw2026(gateway.url, 'tools/call', params));
    assert.equal(answer.error?.code, -32602, JSON.stringify(answer));
    assert.match(answer.error.message, /requestState was sent for a call that never asked for input/);
  });
});
