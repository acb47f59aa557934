// What `npm publish` would put in the main package: the JS entry points, types, bin, lib,
// README and LICENSE — no Rust sources, target folders, addons, tests, test data or benches.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { root } from './helpers.mjs';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

test('the main package holds only what it needs', () => {
  const out = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', shell: process.platform === 'win32' });
  const [pack] = JSON.parse(out);
  const files = pack.files.map((f) => f.path).sort();
  for (const required of ['LICENSE', 'README.md', 'package.json', 'index.js', 'index.d.ts', 'binding.js', 'binding.d.ts', 'config.d.ts', 'schema/discovery.config.schema.json', 'bin/anygpt-discovery.js', 'lib/load-config.js']) {
    assert.ok(files.includes(required), `${required} missing from ${files.join(', ')}`);
  }
  const allowed = /^(LICENSE|README\.md|package\.json|index\.js|index\.d\.ts|binding\.js|binding\.d\.ts|config\.d\.ts|schema\/discovery\.config\.schema\.json|bin\/[\w.-]+\.js|lib\/[\w.-]+\.js)$/;
  const unexpected = files.filter((f) => !allowed.test(f));
  assert.deepEqual(unexpected, [], 'unexpected files in the package');
  const forbidden = files.filter((f) => /\.rs$|\.node$|^target\/|^src\/|^tests?\/|^__test__\/|^bench\/|^npm\/|^scripts\/|Cargo\.|\.jsonl$/.test(f));
  assert.deepEqual(forbidden, []);
  // The packed size stays small: the addon (megabytes) lives in the platform packages. The
  // docs and config types are most of it, and grow with the features they describe.
  assert.ok(pack.unpackedSize < 320_000, `unpacked ${pack.unpackedSize} bytes`);
});
