#!/usr/bin/env node
// The gateway as the client under test of one conformance scenario.
//
// The suite starts the scenario's MCP server, then runs this script with the server's URL as
// the last argument and the scenario's name in MCP_CONFORMANCE_SCENARIO. We write a gateway
// config naming that URL as one `http` server, start the gateway's real bin over stdio with
// the official SDK client, and do through the meta-tools what the suite's reference client
// does directly: list the tools, call the one the scenario expects. Sign-in goes through the
// gateway's own OAuth flow, with BROWSER set to `browser.mjs` (a "user" who approves at once).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const url = process.argv.at(-1);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}');
const SERVER = 'conformance';

/** The Client ID Metadata Document URL the suite's reference client presents. */
const CIMD_URL = 'https://conformance-test.local/client-metadata.json';

/** The `oauth` block for this scenario: credentials the suite hands out, or discovery alone. */
function oauthBlock() {
  const oauth = { clientMetadataUrl: CIMD_URL, clientName: 'anygpt-discovery conformance' };
  if (context.client_id) oauth.clientId = context.client_id;
  if (context.client_secret) oauth.clientSecret = context.client_secret;
  if (scenario.startsWith('auth/client-credentials')) oauth.grant = 'clientCredentials';
  return oauth;
}

function writeConfig() {
  const dir = mkdtempSync(join(tmpdir(), 'anygpt-conformance-'));
  const config = {
    discovery: {
      servers: [
        {
          name: SERVER,
          startupTimeoutMs: 20000,
          timeoutMs: 20000,
          // CONFORMANCE_PLAIN_CONFIG=1 measures a build without the `oauth` block (the baseline).
          connection: { type: 'http', url, ...(process.env.CONFORMANCE_PLAIN_CONFIG ? {} : { oauth: oauthBlock() }) },
        },
      ],
    },
  };
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify(config, null, 2));
  return { dir, path };
}

/** What the scenario's reference client calls after listing: [[tool, arguments], …]. */
function plannedCalls(tools) {
  // Scenarios that name their calls (and the argument values to test) in the context.
  if (Array.isArray(context.toolCalls)) return context.toolCalls.map((c) => [c.name, c.arguments ?? {}]);
  if (scenario === 'http-invalid-tool-headers') return [['valid_tool', { region: 'us-west1' }]];
  // SEP-2322: each multi-round-trip tool once, the unrelated one after an input-required round.
  if (scenario === 'sep-2322-client-request-state') {
    return ['test_mrtr_echo_state', 'test_mrtr_unrelated', 'test_mrtr_no_state', 'test_mrtr_no_result_type'].map((t) => [t, {}]);
  }
  const planned = plannedCall(tools);
  return planned ? [planned] : [];
}

function plannedCall(tools) {
  if (scenario === 'json-schema-ref-no-deref') return null;
  if (scenario === 'sse-retry') return ['test_reconnection', {}];
  if (scenario.startsWith('elicitation')) return ['test_client_elicitation_defaults', {}];
  if (scenario.startsWith('auth/')) return ['test-tool', {}];
  const first = tools[0]?.name;
  return first ? [first, { a: 2, b: 3 }] : null;
}

async function meta(client, name, args) {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
  const text = result.content?.[0]?.text ?? '';
  if (result.isError) throw new Error(`${name}: ${text}`);
  return text;
}

async function main() {
  const { dir, path } = writeConfig();
  const env = {
    ...process.env,
    HOME: dir,
    XDG_CONFIG_HOME: join(dir, '.config'),
    ANYGPT_DISCOVERY_CACHE_DIR: join(dir, 'cache'),
    ANYGPT_DISCOVERY_STATE_DIR: join(dir, 'state'),
    BROWSER: `${JSON.stringify(process.execPath)} ${JSON.stringify(join(here, 'browser.mjs'))}`,
    RUST_LOG: process.env.RUST_LOG ?? 'info',
  };
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(root, 'bin/anygpt-discovery.js'), '--config', path],
    env,
    stderr: 'inherit',
  });
  // The gateway's own client declares what the scenario's reference client would, so
  // requests the server sends during a call have somewhere to go.
  const client = new Client(
    { name: 'anygpt-discovery-conformance', version: '1.0.0' },
    { capabilities: { elicitation: { form: { applyDefaults: true } } } },
  );
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: {} }));
  await client.connect(transport);
  try {
    const listed = JSON.parse(await meta(client, 'list_tools', { server: SERVER }));
    const tools = listed.tools ?? listed;
    console.log(`listed ${Array.isArray(tools) ? tools.length : '?'} tools`);
    if (scenario === 'json-schema-2020-12-preservation') {
      const details = JSON.parse(await meta(client, 'get_tool_details', { server: SERVER, tool: 'json_schema_2020_12_tool' }));
      const schema = details.inputSchema ?? details.tool?.inputSchema;
      console.log(await meta(client, 'execute_tool', { server: SERVER, tool: 'json_schema_echo', arguments: { schema } }));
      return;
    }
    for (const [tool, args] of plannedCalls(Array.isArray(tools) ? tools : [])) {
      console.log(await meta(client, 'execute_tool', { server: SERVER, tool, arguments: args }));
    }
  } finally {
    await client.close();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(`conformance client failed: ${error?.stack ?? error}`);
    process.exit(1);
  },
);
