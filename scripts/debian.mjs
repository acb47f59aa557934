// The Debian packages tests run for real: `redis-server` (the store replicas share), `haproxy`
// (the load balancer in front of them) and `chromium-headless-shell` (the browser that opens a
// per-user sign-in link). When one is missing and this runs as root (CI), it is installed with
// apt-get; otherwise the tests stop before the build with the command to run.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** Each command the tests run, the Debian package that provides it, and how to ask its version. */
export const DEBIAN_TOOLS = [
  { command: 'redis-server', package: 'redis-server', version: ['--version'] },
  { command: 'haproxy', package: 'haproxy', version: ['-v'] },
  { command: 'chromium-headless-shell', package: 'chromium-headless-shell', version: ['--version'] },
];

/** Where Debian puts them: /usr/sbin is not on a user's PATH. */
const SYSTEM_DIRS = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/** The path of `command` (on PATH or in a system folder), or null. */
export function findCommand(command) {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), ...SYSTEM_DIRS];
  for (const dir of dirs) {
    const path = join(dir, command);
    if (existsSync(path)) return path;
  }
  return null;
}

const runs = (tool) => {
  const path = findCommand(tool.command);
  return path !== null && spawnSync(path, tool.version, { stdio: 'ignore' }).status === 0;
};

/**
 * Make sure every command of DEBIAN_TOOLS runs: as root, `apt-get install -y` what is missing
 * (after `apt-get update` when the package lists are empty or stale, as on a fresh container);
 * otherwise throw naming the packages and the command that installs them.
 */
export function ensureDebianTools() {
  const missing = DEBIAN_TOOLS.filter((tool) => !runs(tool)).map((tool) => tool.package);
  if (missing.length === 0) return;
  const install = ['install', '-y', '--no-install-recommends', ...missing];
  const fix = `fix: \`sudo apt-get install -y ${missing.join(' ')}\` (Debian/Ubuntu; elsewhere install Redis, HAProxy and Chromium's headless shell so that \`redis-server\`, \`haproxy\` and \`chromium-headless-shell\` run), then run npm test again`;
  const apt = findCommand('apt-get');
  if (process.getuid?.() !== 0 || !apt) {
    const why = !apt ? 'there is no apt-get here' : 'not running as root, so they are not installed for you';
    throw new Error(`the tests need the packages ${missing.join(', ')}, which are missing (${why})\n${fix}`);
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const aptGet = (args) => {
    process.stderr.write(`\n$ apt-get ${args.join(' ')}\n`);
    return spawnSync(apt, args, { env, stdio: ['ignore', 'inherit', 'pipe'], encoding: 'utf8' });
  };
  // A fresh image has no package lists: the first install fails to find the packages.
  let result = aptGet(install);
  if (result.status !== 0) {
    aptGet(['update']);
    result = aptGet(install);
  }
  const still = DEBIAN_TOOLS.filter((tool) => !runs(tool)).map((tool) => tool.package);
  if (result.status !== 0 || still.length > 0) {
    const why = (result.stderr || `apt-get exited ${result.status}`).trim().slice(-2000);
    throw new Error(`the tests need the packages ${missing.join(', ')}; installing them with apt-get failed: ${why}\n${fix}`);
  }
}
