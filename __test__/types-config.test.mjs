// Typed config for TypeScript (#12 part 4): config.d.ts is generated from the JSON Schema that
// is generated from the Rust config types (a Rust test keeps that one fresh), so the types
// accept exactly what the engine does. The README's full config example must compile.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { configTypes, SCHEMA_FILE, TYPES_FILE } from '../scripts/config-types.mjs';
import { defineConfig, DiscoveryEngine } from '../index.js';
import { call, root, spawnGateway, tempDir } from './helpers.mjs';

const tsc = join(root, 'node_modules/typescript/bin/tsc');

test('config.d.ts is what scripts/config-types.mjs makes of the committed schema', () => {
  assert.equal(readFileSync(TYPES_FILE, 'utf8'), configTypes(), 'stale: run `node scripts/config-types.mjs`');
});

/** The README's full config example (the `export default {` block under Configuration). */
function readmeExample() {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Configuration'));
  const block = /```ts\n(export default \{[\s\S]*?\n\};)\n```/.exec(section);
  assert.ok(block, 'README: no `export default {` ts block under ## Configuration');
  return block[1];
}

/** Compile `source` (a module importing the package) with the repo's tsc; returns its output. */
function compile(source) {
  const dir = tempDir('anygpt-discovery-types-');
  writeFileSync(join(dir, 'config.ts'), source);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', types: [], skipLibCheck: false },
      files: ['config.ts'],
    }),
  );
  try {
    execFileSync(process.execPath, [tsc, '-p', dir], { encoding: 'utf8' });
    return { ok: true, output: '' };
  } catch (error) {
    return { ok: false, output: `${error.stdout}${error.stderr}` };
  }
}

const importPackage = `import { defineConfig } from ${JSON.stringify(join(root, 'index.js'))};\n`;

test('tsc accepts the README full config example through defineConfig', () => {
  const example = readmeExample().replace(/^export default \{/, 'export default defineConfig({').replace(/\};$/, '});');
  const { ok, output } = compile(`${importPackage}${example}\n`);
  assert.ok(ok, output);
});

test('tsc rejects a misspelled field, a wrong type and a bad transport, naming each', () => {
  const { ok, output } = compile(`${importPackage}
export const a = defineConfig({ discovery: { idleTimeoutMS: 1 } });
export const b = defineConfig({ discovery: { maxResultBytes: '1 MiB' } });
export const c = defineConfig({ discovery: { servers: [{ name: 'x', connection: { type: 'websocket', url: 'ws://h' } }] } });
export const d = defineConfig({ discovery: { servers: [{ name: 'x' }] } });
`);
  assert.equal(ok, false);
  // Lines 3-6 of the module: one error each, at the field.
  assert.match(output, /config\.ts\(3,\d+\).*'idleTimeoutMS' does not exist.*Did you mean to write 'idleTimeoutMs'/);
  assert.match(output, /config\.ts\(4,\d+\).*Type 'string' is not assignable to type 'number'/);
  assert.match(output, /config\.ts\(5,\d+\).*'"websocket"' is not assignable to type '"stdio" \| "http" \| "sse" \| undefined'/);
  assert.match(output, /config\.ts\(6,\d+\).*Property 'connection' is missing/);
});

test('connection is a union discriminated by type: a field of another transport is rejected', () => {
  const { ok, output } = compile(`${importPackage}
export const a = defineConfig({ discovery: { servers: [{ name: 'x', connection: { type: 'http', url: 'http://h', command: 'npx' } }] } });
export const b = defineConfig({ discovery: { servers: [{ name: 'x', connection: { type: 'stdio', command: 'node', headers: {} } }] } });
export const c = defineConfig({ discovery: { servers: [{ name: 'x', connection: { type: 'sse' } }] } });
export const d = defineConfig({ discovery: { sources: ['vs-code'] } });
export const e = defineConfig({ discovery: { sources: [{ type: 'cursor', paths: '~/x.json' }] } });
`);
  assert.equal(ok, false);
  assert.match(output, /config\.ts\(3,\d+\).*'command' does not exist in type '\{ type: "http"/);
  assert.match(output, /config\.ts\(4,\d+\).*'headers' does not exist in type '\{ type\?: "stdio"/);
  assert.match(output, /config\.ts\(5,\d+\).*\n\s*Property 'url' is missing/);
  assert.match(output, /config\.ts\(6,\d+\).*'"vs-code"' is not assignable to type 'SourceEntry'/);
  assert.match(output, /config\.ts\(7,\d+\).*'paths' does not exist/);
});

test('every transport and source form the engine takes compiles', () => {
  const { ok, output } = compile(`${importPackage}
export default defineConfig({
  discovery: {
    servers: [
      { name: 'a', connection: { command: 'npx', args: ['-y', 'x'], env: { K: '\${K}' }, cwd: '.' } },
      { name: 'b', connection: { type: 'stdio', command: 'node' } },
      { name: 'c', connection: { type: 'http', url: 'https://h/mcp', headers: { Authorization: 'Bearer \${T}' } } },
      { name: 'd', connection: { type: 'sse', url: 'https://h/sse' } },
    ],
    sources: ['claude-desktop', { type: 'cursor' }, { type: 'custom', path: '~/servers.yaml' }],
  },
});
`);
  assert.ok(ok, output);
});

test('another section beside discovery is allowed, and $schema too', () => {
  const { ok, output } = compile(`${importPackage}
export default defineConfig({
  $schema: './node_modules/@anygpt/discovery/schema/discovery.config.schema.json',
  discovery: { servers: [{ name: 'a', connection: { command: 'node' } }] },
  providers: { openai: { model: 'gpt' } },
});
`);
  assert.ok(ok, output);
});

test('defineConfig returns its argument, and the engine takes a config with $schema', async () => {
  const config = { $schema: 'schema/discovery.config.schema.json', discovery: { servers: [] } };
  assert.equal(defineConfig(config), config);
  const engine = new DiscoveryEngine(config);
  assert.deepEqual(await engine.listServers(), []);
  await engine.close();
  const bare = new DiscoveryEngine({ $schema: 'x', servers: [] });
  await bare.close();
});

test('the published schema describes the config file', () => {
  const schema = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8'));
  assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
  assert.deepEqual(Object.keys(schema.properties).sort(), ['$schema', 'discovery']);
  const section = schema.$defs.DiscoverySection.properties;
  for (const field of ['servers', 'toolRules', 'idleTimeoutMs', 'maxResultBytes', 'audit', 'cache']) assert.ok(section[field], field);
});

test('an anygpt.config.ts using defineConfig, with another section, loads through the bin', async () => {
  const dir = tempDir();
  const file = join(dir, 'anygpt.config.ts');
  const server = join(root, '__test__/fixtures/fault-server.mjs');
  writeFileSync(
    file,
    `${importPackage}
const timeoutMs: number = 5000;
export default defineConfig({
  providers: { openai: { model: 'gpt' } },
  discovery: { servers: [{ name: 'typed', connection: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(server)}] }, timeoutMs }] },
});
`,
  );
  const gateway = await spawnGateway(['--config', file]);
  try {
    const { body } = await call(gateway.client, 'list_mcp_servers');
    assert.deepEqual(body.servers.map((s) => [s.name, s.status]), [['typed', 'connected']]);
    // The bin can evaluate it again: the file is watched (config-reload.test.mjs reloads it).
    assert.match(gateway.stderr(), /watching the config for changes/);
  } finally {
    await gateway.client.close();
    await gateway.exit;
  }
});
