#!/usr/bin/env node
// A short scripted session: the official MCP client starts the gateway (the npm bin) on
// examples/demo.config.json — three real reference servers — and walks the flow a model
// follows: list servers → search → details → execute, plus what a blocked call looks like.
//
//   npm run demo            (builds first)
//   node examples/demo.mjs  (when already built)
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const transport = new StdioClientTransport({
  command: process.execPath,
  args: [join(root, 'bin/anygpt-discovery.js'), '--config', join(root, 'examples/demo.config.json')],
  env: { ...process.env, ANYGPT_LOG: process.env.ANYGPT_LOG ?? 'warn' },
  stderr: 'inherit',
});
const client = new Client({ name: 'anygpt-discovery-demo', version: '0.1.0' });

const started = performance.now();
await client.connect(transport);
console.log(`connected to the gateway in ${Math.round(performance.now() - started)} ms`);

const { tools } = await client.listTools();
console.log(`\nthe client sees ${tools.length} tools: ${tools.map((t) => t.name).join(', ')}`);

async function step(title, name, args) {
  const result = await client.callTool({ name, arguments: args });
  const text = result.content.map((c) => (c.type === 'text' ? c.text : `[${c.type}]`)).join('\n');
  console.log(`\n▸ ${title}\n  ${name} ${JSON.stringify(args)}${result.isError ? '  (isError)' : ''}\n  ${text.length > 600 ? `${text.slice(0, 600)}…` : text}`);
  return text;
}

await step('which servers are behind the gateway?', 'list_mcp_servers', {});
await step('find a tool for the task', 'search_tools', { query: 'read the contents of a file', limit: 3 });
await step('read its schema before calling it', 'get_tool_details', { server: 'filesystem', tool: 'read_text_file' });
await step('run it', 'execute_tool', {
  server: 'filesystem', tool: 'read_text_file', arguments: { path: join(root, 'examples/files/hello.txt') },
});
await step('an exact name ranks first', 'search_tools', { query: 'echo', limit: 3 });
await step('results pass through unchanged', 'execute_tool', { server: 'everything', tool: 'echo', arguments: { message: 'hello through the gateway' } });
await step('toolRules block writes in the demo', 'execute_tool', {
  server: 'filesystem', tool: 'write_file', arguments: { path: join(root, 'examples/files/nope.txt'), content: 'x' },
});
await step('a typo gets suggestions', 'execute_tool', { server: 'everything', tool: 'ecko', arguments: {} });

await client.close();
console.log('\ndone: the gateway closed its servers and exited.');
