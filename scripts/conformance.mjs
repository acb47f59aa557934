#!/usr/bin/env node
// `npm run conformance`: the official MCP conformance suite's client scenarios, run with the
// gateway as the client (through conformance/client.mjs), summed up as a table on stdout and
// in CONFORMANCE.md.
//
// The suite needs Node >= 22; on an older Node this script fetches `node-<os>-<arch>@22` from
// the npm registry into node_modules/.cache/anygpt-conformance/ and runs itself again under it.
// Not part of `npm test`: it takes minutes and drives the real debug build
// (`node scripts/build.mjs` first).
//
//   node scripts/conformance.mjs                 every client scenario
//   node scripts/conformance.mjs auth/ sse-retry scenarios whose names start with these
//   CONFORMANCE_JOBS=2                           scenarios run at once (default 3)
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cache = join(root, 'node_modules/.cache/anygpt-conformance');
const require = createRequire(import.meta.url);
const SUITE = '@modelcontextprotocol/conformance';
const suitePackage = require(`${SUITE}/package.json`);
const suiteBin = join(dirname(require.resolve(`${SUITE}/package.json`)), suitePackage.bin.conformance);
const SCENARIO_TIMEOUT_MS = 60000;

/** A Node >= 22 to run the suite with: this one, or one fetched from the npm registry. */
function node22() {
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  const pkg = `node-${process.platform === 'win32' ? 'win' : process.platform}-${process.arch}`;
  const bin = join(cache, 'node_modules', pkg, process.platform === 'win32' ? 'node.exe' : 'bin/node');
  if (!existsSync(bin)) {
    mkdirSync(cache, { recursive: true });
    console.error(`Node ${process.versions.node} is older than the suite needs; fetching ${pkg}@22 into ${cache}`);
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const done = spawnSync(npm, ['install', '--no-save', '--no-package-lock', '--prefix', cache, `${pkg}@22`], { stdio: 'inherit' });
    if (done.status !== 0) throw new Error(`npm install ${pkg}@22 failed`);
  }
  return bin;
}

/** The suite's client scenarios with the spec versions it tags them with. */
function clientScenarios(node) {
  const listed = spawnSync(node, [suiteBin, 'list'], { encoding: 'utf8' });
  if (listed.status !== 0) throw new Error(`conformance list failed: ${listed.stderr}`);
  const section = listed.stdout.split('Client scenarios')[1]?.split(/\n\n/)[0] ?? '';
  return [...section.matchAll(/^\s+- (\S+) \[([^\]]*)\]/gm)].map(([, name, versions]) => ({ name, versions }));
}

/** Which requirement set (or "extension"/"draft-only") a scenario belongs to. */
function scoring() {
  const dir = join(dirname(require.resolve(`${SUITE}/package.json`)), 'requirements');
  const required = new Map();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort()) {
    const revision = file.replace(/\.yaml$/, '');
    const text = readFileSync(join(dir, file), 'utf8');
    const client = text.split(/^client:\s*$/m)[1]?.split(/^\S/m)[0] ?? '';
    for (const [, name] of client.matchAll(/^\s+- (\S+)\s*$/gm)) {
      required.set(name, [...(required.get(name) ?? []), revision]);
    }
  }
  return required;
}

/** Run one scenario; resolves with its checks (from the suite's checks.json) and exit code. */
function runScenario(node, scenario, outputs) {
  const out = join(outputs, scenario.name.replaceAll('/', '_'));
  rmSync(out, { recursive: true, force: true });
  const command = `${JSON.stringify(node)} ${JSON.stringify(join(root, 'conformance/client.mjs'))}`;
  const args = [suiteBin, 'client', '--command', command, '--scenario', scenario.name, '--timeout', String(SCENARIO_TIMEOUT_MS), '-o', out];
  return new Promise((resolve) => {
    const child = spawn(node, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout.on('data', (c) => (log += c));
    child.stderr.on('data', (c) => (log += c));
    child.on('exit', (code) => {
      writeFileSync(join(outputs, `${scenario.name.replaceAll('/', '_')}.log`), log);
      resolve({ ...scenario, code, checks: readChecks(out) });
    });
  });
}

function readChecks(dir) {
  const found = [];
  const walk = (d) => {
    if (!existsSync(d)) return;
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name === 'checks.json') found.push(...JSON.parse(readFileSync(path, 'utf8')));
    }
  };
  walk(dir);
  return found;
}

/**
 * A scenario passes when it ran, no check failed and one succeeded; with every check
 * skipped (the scenario needs a feature the client never used), it is "skipped".
 */
function verdict(result) {
  const failed = result.checks.filter((c) => c.status === 'FAILURE');
  const passed = result.checks.filter((c) => c.status === 'SUCCESS');
  const skipped = result.checks.length > 0 && failed.length === 0 && passed.length === 0;
  const ok = passed.length > 0 && failed.length === 0 && result.code === 0;
  const word = ok ? 'pass' : skipped ? 'skipped' : 'FAIL';
  const firstFailure = failed[0] ?? (skipped ? result.checks[0] : undefined);
  return { ok, word, passed: passed.length, failed: failed.length, firstFailure };
}

async function main() {
  const node = node22();
  if (node !== process.execPath) {
    const again = spawnSync(node, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
    process.exit(again.status ?? 1);
  }
  const prefixes = process.argv.slice(2);
  const scenarios = clientScenarios(node).filter((s) => !prefixes.length || prefixes.some((p) => s.name.startsWith(p)));
  const required = scoring();
  const outputs = join(root, 'node_modules/.cache/anygpt-conformance/results');
  mkdirSync(outputs, { recursive: true });
  const jobs = Number(process.env.CONFORMANCE_JOBS ?? 3);
  const results = [];
  const queue = [...scenarios];
  await Promise.all(
    Array.from({ length: jobs }, async () => {
      for (let next; (next = queue.shift()); ) {
        const result = await runScenario(node, next, outputs);
        const v = verdict(result);
        console.error(`${v.word.toUpperCase()} ${result.name} (${v.passed}/${v.passed + v.failed})`);
        results.push(result);
      }
    }),
  );
  results.sort((a, b) => scenarios.indexOf(scenarios.find((s) => s.name === a.name)) - scenarios.indexOf(scenarios.find((s) => s.name === b.name)));
  const table = render(results, required);
  console.log(table);
  if (!prefixes.length) writeFileSync(join(root, 'CONFORMANCE.md'), markdown(table));
  console.error(`details: ${outputs}`);
}

function kind(result, required) {
  const revisions = required.get(result.name);
  if (revisions) return `required ${revisions.join(', ')}`;
  if (result.versions.includes('extension')) return 'extension';
  return 'not in a requirement set';
}

function render(results, required) {
  const rows = results.map((r) => {
    const v = verdict(r);
    const why = v.ok ? '' : v.firstFailure ? `${v.firstFailure.id}: ${v.firstFailure.errorMessage ?? v.firstFailure.description ?? ''}` : `no checks (exit ${r.code})`;
    return `| ${r.name} | ${r.versions} | ${kind(r, required)} | ${v.word} | ${v.passed}/${v.passed + v.failed} | ${why.replaceAll('|', '\\|').replaceAll('\n', ' ').slice(0, 160)} |`;
  });
  const count = (filter) => {
    const chosen = results.filter(filter);
    return `${chosen.filter((r) => verdict(r).ok).length} of ${chosen.length}`;
  };
  const checks = results.flatMap((r) => r.checks);
  return [
    `Suite ${SUITE}@${suitePackage.version}, client scenarios, gateway as the client.`,
    '',
    `- required by 2025-11-25: ${count((r) => required.get(r.name)?.includes('2025-11-25'))} pass`,
    `- required by 2026-07-28: ${count((r) => required.get(r.name)?.includes('2026-07-28'))} pass`,
    `- extensions: ${count((r) => r.versions.includes('extension'))} pass`,
    `- all: ${count(() => true)} pass; checks ${checks.filter((c) => c.status === 'SUCCESS').length} of ${checks.filter((c) => c.status !== 'INFO' && c.status !== 'SKIPPED').length}`,
    '',
    '| scenario | spec versions | scored | result | checks | first failing (or skipped) check |',
    '|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

/** The server scenarios' section (scripts/conformance-server.mjs), kept as it is. */
function serverSection() {
  const file = join(root, 'CONFORMANCE.md');
  if (!existsSync(file)) return '';
  const text = readFileSync(file, 'utf8');
  const start = text.indexOf('<!-- server scenarios:');
  return start >= 0 ? `\n${text.slice(start).trimEnd()}\n` : '';
}

function markdown(table) {
  // Why the failing scenarios fail and the baseline: written by hand, kept beside the wrapper.
  const notes = readFileSync(join(root, 'conformance/notes.md'), 'utf8');
  return `# MCP conformance (the gateway as a client)

Written by \`npm run conformance\` (scripts/conformance.mjs), which runs every client scenario of the
official suite with the gateway as the client under test: \`conformance/client.mjs\` configures the
scenario's URL as one \`http\` server, starts the gateway's bin, lists the server's tools and calls
the scenario's tool through the meta-tools. Sign-in runs through the gateway's own OAuth flow with
\`BROWSER\` set to \`conformance/browser.mjs\`, which approves at once. Run \`node scripts/build.mjs\`
first; per-scenario logs and checks land in \`node_modules/.cache/anygpt-conformance/results/\`.

${table}

${notes}${serverSection()}`;
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
