#!/usr/bin/env node
// `npm run conformance:server`: the official MCP conformance suite's server scenarios against
// the gateway's team face (`serve --http` on loopback, server-everything behind it), for the
// scenarios `--requirements 2026-07-28` and `--requirements 2025-11-25` select. The table goes
// to stdout and into CONFORMANCE.md between the `server` markers (the client run keeps them).
// Not part of `npm test`: run `node scripts/build.mjs` first. Needs Node >= 22 (the suite's).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const SUITE = '@modelcontextprotocol/conformance';
const suitePackage = require(`${SUITE}/package.json`);
const suiteBin = join(dirname(require.resolve(`${SUITE}/package.json`)), suitePackage.bin.conformance);
const REVISIONS = ['2026-07-28', '2025-11-25'];
/** Scenarios #26 requires to pass in full. */
const MUST_PASS = ['server-stateless', 'http-header-validation', 'dns-rebinding-protection', 'server-sse-multiple-streams', 'tools-list', 'caching'];
export const START = '<!-- server scenarios: written by scripts/conformance-server.mjs -->';
export const END = '<!-- end of server scenarios -->';

/** `serve --http 127.0.0.1:0` through the npm bin, with a temp HOME; resolves with its URL. */
async function startGateway() {
  const home = mkdtempSync(join(tmpdir(), 'anygpt-conformance-home-'));
  const config = join(home, 'config.json');
  const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
  writeFileSync(config, JSON.stringify({ discovery: { servers: [{ name: 'everything', connection: { command: process.execPath, args: [everything] } }] } }));
  const child = spawn(process.execPath, [join(root, 'bin/anygpt-discovery.js'), 'serve', '--http', '127.0.0.1:0', '--config', config], {
    env: {
      ...process.env,
      HOME: home,
      XDG_CONFIG_HOME: join(home, '.config'),
      ANYGPT_DISCOVERY_CACHE_DIR: join(home, 'cache'),
      ANYGPT_DISCOVERY_STATE_DIR: join(home, 'state'),
      ANYGPT_DISCOVERY_TOKEN_STORE: 'file',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  const url = await new Promise((resolve, reject) => {
    child.stderr.on('data', () => {
      const found = /listening on (http:\/\/\S+\/mcp)/.exec(stderr);
      if (found) resolve(found[1]);
    });
    child.on('exit', (code) => reject(new Error(`the gateway exited ${code}:\n${stderr}`)));
  });
  // Let server-everything connect, so tools-list sees the catalog it would in use.
  for (let i = 0; i < 100 && !/connected server=everything/.test(stderr); i++) await new Promise((r) => setTimeout(r, 50));
  return { url, stop: () => child.kill('SIGTERM'), home };
}

/** Every scenario's checks in a `conformance server -o` folder, by scenario name. */
function scenarioChecks(dir) {
  const found = new Map();
  if (!existsSync(dir)) return found;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const name = entry.name.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT.*$/, '');
    const file = join(dir, entry.name, 'checks.json');
    if (existsSync(file)) found.set(name, JSON.parse(readFileSync(file, 'utf8')));
  }
  return found;
}

function verdict(checks) {
  const failed = checks.filter((c) => c.status === 'FAILURE');
  const passed = checks.filter((c) => c.status === 'SUCCESS');
  const word = failed.length ? 'FAIL' : passed.length ? 'pass' : 'skipped';
  return { word, passed: passed.length, failed: failed.length, first: failed[0] };
}

async function main() {
  const outputs = join(root, 'node_modules/.cache/anygpt-conformance/server');
  mkdirSync(outputs, { recursive: true });
  const gateway = await startGateway();
  const sections = [];
  try {
    for (const revision of REVISIONS) {
      const out = join(outputs, revision);
      rmSync(out, { recursive: true, force: true });
      const run = spawnSync(process.execPath, [suiteBin, 'server', '--url', gateway.url, '--requirements', revision, '-o', out], {
        cwd: root,
        encoding: 'utf8',
        timeout: 600_000,
      });
      writeFileSync(join(outputs, `${revision}.log`), `${run.stdout}\n${run.stderr}`);
      const results = [...scenarioChecks(out)].map(([name, checks]) => ({ name, ...verdict(checks) }));
      results.sort((a, b) => a.name.localeCompare(b.name));
      const ok = results.filter((r) => r.word !== 'FAIL').length;
      const rows = results.map((r) => {
        const why = r.first ? `${r.first.id}: ${r.first.errorMessage ?? r.first.description ?? ''}` : '';
        const must = MUST_PASS.includes(r.name) ? ' (must pass)' : '';
        return `| ${r.name}${must} | ${r.word} | ${r.passed}/${r.passed + r.failed} | ${why.replaceAll('|', '\\|').replaceAll('\n', ' ').slice(0, 200)} |`;
      });
      sections.push(
        [
          `### --requirements ${revision}: ${ok} of ${results.length} scenarios pass`,
          '',
          '| scenario | result | checks | first failing check |',
          '|---|---|---|---|',
          ...rows,
        ].join('\n'),
      );
      console.error(`${revision}: ${ok} of ${results.length} pass (${out})`);
    }
  } finally {
    gateway.stop();
    rmSync(gateway.home, { recursive: true, force: true });
  }
  const notes = readFileSync(join(root, 'conformance/server-notes.md'), 'utf8');
  const section = [
    START,
    '# MCP conformance (the gateway as a server, `serve --http`)',
    '',
    `Written by \`npm run conformance:server\` (scripts/conformance-server.mjs): suite ${SUITE}@${suitePackage.version},`,
    'server scenarios of each requirement set, against `anygpt-discovery serve --http 127.0.0.1:0` with',
    'server-everything behind it. Per-scenario checks land in `node_modules/.cache/anygpt-conformance/server/`.',
    '',
    ...sections.flatMap((s) => [s, '']),
    notes.trim(),
    END,
  ].join('\n');
  console.log(section);
  const file = join(root, 'CONFORMANCE.md');
  const current = readFileSync(file, 'utf8');
  const start = current.indexOf(START);
  const end = current.indexOf(END);
  const next = start >= 0 && end > start ? `${current.slice(0, start)}${section}${current.slice(end + END.length)}` : `${current.trimEnd()}\n\n${section}\n`;
  writeFileSync(file, next);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
