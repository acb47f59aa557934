// `uvx` for the tests: a PyPI server added from the registry runs as `uvx <package>`, and the
// registry test runs one for real. If `uvx` is not on PATH, uv (which provides it, from PyPI)
// is installed with Python's pip into the gitignored `.ci/uv`; a second run finds it there.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** The uv release line the tests are run with when we install it ourselves. */
const UV_REQUIREMENT = 'uv>=0.13,<0.14';

/** Where pip --target puts uv's package; its `uvx` lands in `bin` (`Scripts` on Windows). */
export const uvTarget = (root) => join(root, '.ci', 'uv');

const exe = (name) => (process.platform === 'win32' ? `${name}.exe` : name);

/** The folder of our own installed `uvx`, or null when there is none. */
export function installedUvBin(root) {
  for (const folder of ['bin', 'Scripts']) {
    const dir = join(uvTarget(root), folder);
    if (existsSync(join(dir, exe('uvx')))) return dir;
  }
  return null;
}

const runs = (command, env = process.env) => spawnSync(command, ['--version'], { env, stdio: 'ignore' }).status === 0;

/**
 * Make sure `uvx` runs: null when it is already on PATH, else the bin folder to put first on
 * PATH (installing uv there first if needed). Throws with what to do when pip is missing.
 */
export function ensureUvx(root) {
  if (runs('uvx')) return null;
  const existing = installedUvBin(root);
  if (existing && runs(join(existing, exe('uvx')))) return existing;
  const python = ['python3', 'python'].find((p) => runs(p));
  const args = ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--upgrade', '--target', uvTarget(root), UV_REQUIREMENT];
  process.stderr.write(`\n$ ${python ?? 'python3'} ${args.join(' ')}\n`);
  const result = python ? spawnSync(python, args, { stdio: ['ignore', 'inherit', 'pipe'], encoding: 'utf8' }) : null;
  const installed = installedUvBin(root);
  if (!result || result.status !== 0 || !installed) {
    const why = !python ? 'no python3 on PATH' : (result.stderr || `pip exited ${result.status}`).trim();
    throw new Error(
      `the tests need uvx (uv, from PyPI) and it is not on PATH; installing it into ${uvTarget(root)} failed: ${why}\n` +
        `fix: install Python's pip (e.g. \`python3 -m ensurepip --upgrade\` or your OS package python3-pip), ` +
        `or install uv yourself (https://docs.astral.sh/uv/) so that \`uvx\` is on PATH, then run npm test again`,
    );
  }
  return installed;
}
