#!/usr/bin/env node
// config.d.ts from schema/discovery.config.schema.json, which is generated from the Rust
// config types (src/config/schema.rs; a Rust test fails when the two differ). So the
// TypeScript config types, the JSON Schema editors validate with, and what the engine accepts
// are one thing.
//
//   node scripts/config-types.mjs          write config.d.ts (only when it changes)
//   node scripts/config-types.mjs --check  exit 1 when the committed config.d.ts is stale
//
// Renders the subset of JSON Schema that schemars emits for serde types: $defs/$ref, objects
// (properties, required, additionalProperties), arrays, scalars, enums/consts, anyOf/oneOf,
// type lists with null, descriptions and defaults (as JSDoc); a union of objects (`connection`,
// one per transport) becomes a documented TypeScript union discriminated by `type`.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const SCHEMA_FILE = join(root, 'schema/discovery.config.schema.json');
export const TYPES_FILE = join(root, 'config.d.ts');

/** Rust type names as the TypeScript API has always called them. */
const NAMES = {
  DiscoverySection: 'DiscoveryConfig',
  ServerSpec: 'ServerConfig',
  ConnectionSpec: 'ServerConnection',
  ToolRuleSpec: 'ToolRule',
  CallersSpec: 'ToolRuleCallers',
  CacheSpec: 'CacheConfig',
  AuditSpec: 'AuditConfig',
  OneOrMany: 'PatternList',
  SourceSpec: 'SourceEntry',
  SourceKind: 'SourceType',
};

const tsName = (rustName) => NAMES[rustName] ?? rustName;

function refName(ref) {
  const match = /^#\/\$defs\/(.+)$/.exec(ref);
  if (!match) throw new Error(`config-types: unsupported $ref ${ref}`);
  return tsName(match[1]);
}

function scalar(type) {
  switch (type) {
    case 'string':
      return 'string';
    case 'integer':
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    default:
      throw new Error(`config-types: unsupported type ${type}`);
  }
}

/** The TypeScript type of `schema`, `depth` levels deep (for indentation). */
function typeOf(schema, depth) {
  if (schema === true || schema === undefined) return 'unknown';
  if (schema === false) return 'never';
  if (schema.$ref) return refName(schema.$ref);
  if ('const' in schema) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  const union = schema.anyOf ?? schema.oneOf;
  if (union) return [...new Set(union.map((s) => typeOf(s, depth)))].join(' | ');
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  return types
    .map((type) => {
      if (type === 'array') return `Array<${typeOf(schema.items, depth)}>`;
      if (type === 'object') return objectType(schema, depth);
      return scalar(type);
    })
    .join(' | ');
}

function objectType(schema, depth) {
  const properties = Object.entries(schema.properties ?? {});
  const extra = schema.additionalProperties;
  if (!properties.length) return extra && extra !== true ? `Record<string, ${typeOf(extra, depth)}>` : 'Record<string, unknown>';
  const pad = '  '.repeat(depth + 1);
  const required = new Set(schema.required ?? []);
  const lines = properties.map(([name, property]) => {
    const key = /^[A-Za-z_$][\w$]*$/.test(name) ? name : JSON.stringify(name);
    const optional = required.has(name) ? '' : '?';
    return `${doc(property, pad)}${pad}${key}${optional}: ${typeOf(property, depth + 1)}`;
  });
  return `{\n${lines.join('\n')}\n${'  '.repeat(depth)}}`;
}

/** A JSDoc block from `description` and `default`. */
function doc(schema, pad) {
  if (typeof schema !== 'object') return '';
  const parts = [];
  if (schema.description) parts.push(...schema.description.split('\n'));
  if ('default' in schema && schema.default !== null && typeof schema.default !== 'object') {
    parts.push(`@default ${JSON.stringify(schema.default)}`);
  }
  if (!parts.length) return '';
  if (parts.length === 1) return `${pad}/** ${parts[0].replaceAll('*/', '*\\/')} */\n`;
  return `${pad}/**\n${parts.map((p) => `${pad} * ${p.replaceAll('*/', '*\\/')}`.trimEnd()).join('\n')}\n${pad} */\n`;
}

/** A union of objects (a discriminated union such as `connection`): one documented member a line. */
function objectUnion(schema) {
  const members = schema.oneOf ?? schema.anyOf;
  if (!members || !members.every((m) => m.type === 'object' && m.properties)) return undefined;
  return members.map((m) => `\n${doc(m, '  ')}  | ${objectType(m, 1)}`).join('');
}

function declaration(name, schema) {
  const union = objectUnion(schema);
  if (union) return `${doc(schema, '')}export type ${name} =${union}`;
  const body = typeOf(schema, 0);
  const isObject = body.startsWith('{');
  return `${doc(schema, '')}${isObject ? `export interface ${name} ${body}` : `export type ${name} = ${body}`}`;
}

/** The whole config.d.ts for `schema`. */
export function renderConfigTypes(schema) {
  const defs = Object.entries(schema.$defs ?? {}).sort(([a], [b]) => tsName(a).localeCompare(tsName(b)));
  const { $defs, $schema, title, ...rootSchema } = schema;
  const file = {
    ...rootSchema,
    description: `${title ?? 'A config file'}: the \`discovery\` section, and other sections beside it (an \`anygpt.config.ts\` holds several).`,
  };
  const rootType = declaration('DiscoveryConfigFile', { ...file, additionalProperties: undefined }).replace(
    /\n}$/,
    '\n  [section: string]: unknown\n}',
  );
  return [
    '/* auto-generated by scripts/config-types.mjs from schema/discovery.config.schema.json (itself',
    ' * generated from the Rust config types): do not edit. */',
    '/* eslint-disable */',
    '',
    ...defs.map(([name, def]) => declaration(tsName(name), def)).flatMap((d) => [d, '']),
    rootType,
    '',
  ].join('\n');
}

export function configTypes() {
  return renderConfigTypes(JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')));
}

/** Write config.d.ts when it changed; returns whether it was stale. */
export function writeConfigTypes() {
  const text = configTypes();
  const stale = !existsSync(TYPES_FILE) || readFileSync(TYPES_FILE, 'utf8') !== text;
  if (stale) writeFileSync(TYPES_FILE, text);
  return stale;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--check')) {
    const fresh = existsSync(TYPES_FILE) && readFileSync(TYPES_FILE, 'utf8') === configTypes();
    if (!fresh) {
      process.stderr.write('config.d.ts is stale: run `node scripts/config-types.mjs`\n');
      process.exit(1);
    }
  } else {
    writeConfigTypes();
  }
}
