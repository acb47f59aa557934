#!/usr/bin/env node
// Regenerates tests/fixtures/registry-catalog.jsonl, the public catalog the Rust search tests
// run over (see tests/fixtures/README.md for its source and licence):
//
//   node scripts/fixture-catalog.mjs <path>/catalogs/docker-registry.jsonl
//
// Every fourth server of docker/mcp-registry's tool lists, by server id, with all its tools:
// large and varied enough that exact names collide across servers and ranking is not trivial.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const source = process.argv[2];
if (!source) {
  process.stderr.write('usage: node scripts/fixture-catalog.mjs <docker-registry.jsonl>\n');
  process.exit(2);
}
const lines = readFileSync(source, 'utf8').split('\n').filter(Boolean);
const servers = [...new Set(lines.map((l) => JSON.parse(l).server))].sort();
const kept = new Set(servers.filter((_, i) => i % 4 === 0));
const out = lines.filter((l) => kept.has(JSON.parse(l).server));
const file = join(dirname(fileURLToPath(import.meta.url)), '..', 'tests/fixtures/registry-catalog.jsonl');
writeFileSync(file, `${out.join('\n')}\n`);
process.stderr.write(`${out.length} tools of ${kept.size} servers -> ${file}\n`);
