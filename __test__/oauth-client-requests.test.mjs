// Requests a downstream server sends its client during a call — elicitation and sampling from
// server-everything — reach the gateway's own client (the official SDK client here) and its
// answers go back; a client that did not declare the capability gets a clear refusal.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { bin, isolatedEnv, referenceServer, writeConfig } from './helpers.mjs';

/** The gateway in front of server-everything, with a client declaring `capabilities`. */
async function gatewayWith(capabilities, handlers = {}) {
  const config = writeConfig({ discovery: { servers: [referenceServer('everything')] } });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bin, '--config', config],
    env: isolatedEnv(),
    stderr: 'pipe',
  });
  const client = new Client({ name: 'client-requests-test', version: '0.0.0' }, { capabilities });
  if (handlers.elicit) client.setRequestHandler(ElicitRequestSchema, handlers.elicit);
  if (handlers.sample) client.setRequestHandler(CreateMessageRequestSchema, handlers.sample);
  await client.connect(transport);
  return client;
}

/** Run a tool of server-everything, waiting for tools it registers after the handshake. */
async function run(client, tool, args = {}) {
  for (const until = Date.now() + 15000; ; await new Promise((r) => setTimeout(r, 200))) {
    const result = await client.callTool({ name: 'execute_tool', arguments: { server: 'everything', tool, arguments: args } });
    const text = result.content?.[0]?.text ?? '';
    if (!(result.isError && text.includes('TOOL_NOT_FOUND')) || Date.now() > until) return { result, text: result.content.map((c) => c.text ?? '').join('\n') };
  }
}

test('an elicitation from a downstream server is answered by the gateway client', async () => {
  const asked = [];
  const client = await gatewayWith(
    { elicitation: {} },
    {
      elicit: async (request) => {
        asked.push(request.params.message);
        return { action: 'accept', content: { name: 'Ada Lovelace', check: true } };
      },
    },
  );
  try {
    const { result, text } = await run(client, 'trigger-elicitation-request');
    assert.equal(result.isError, undefined, text);
    assert.equal(asked.length, 1);
    assert.match(asked[0], /Please provide inputs/);
    assert.match(text, /Ada Lovelace/);
  } finally {
    await client.close();
  }
});

test('a sampling request from a downstream server is answered by the gateway client', async () => {
  const client = await gatewayWith(
    { sampling: {} },
    {
      sample: async (request) => ({
        model: 'test-model',
        role: 'assistant',
        content: { type: 'text', text: `sampled: ${request.params.messages.length} message(s)` },
      }),
    },
  );
  try {
    const { result, text } = await run(client, 'trigger-sampling-request', { prompt: 'hello', maxTokens: 20 });
    assert.equal(result.isError, undefined, text);
    assert.match(text, /sampled: 1 message\(s\)/);
  } finally {
    await client.close();
  }
});

test('a client without the capability gets a refusal that says so', async () => {
  const client = await gatewayWith({});
  try {
    const { result, text } = await run(client, 'trigger-sampling-request', { prompt: 'hello', maxTokens: 20 });
    assert.equal(result.isError, true, text);
    assert.match(text, /does not support sampling/);
  } finally {
    await client.close();
  }
});
