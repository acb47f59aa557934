// Consent for project-scoped configs (#24), as a user and as an attacker would meet it: a fresh
// HOME, the gateway started with no arguments in a project folder the way an editor starts it,
// through the native binary and the npm bin, driven by the official SDK client. A project file
// (any client's, or our own) runs nothing, contacts nothing and is not evaluated until its
// user approves it with `anygpt-discovery allow`; Claude Code's own per-project record counts.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { hostTriple } from '../scripts/host.mjs';
import { createEngine } from '../index.js';
import { bin, call, isolatedEnv, root, serverPaths, tempDir, waitFor } from './helpers.mjs';

const native = join(root, 'target', hostTriple(), 'debug/anygpt-discovery');
const faces = [
  ['native binary', native, []],
  ['npm bin', process.execPath, [bin]],
];
/** How long a skipped file gets to do harm before the test says it did none. */
const GRACE_MS = 3000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A user's machine: an empty home, a project folder, a state folder kept across runs. */
function machine() {
  const dir = tempDir('anygpt-discovery-consent-');
  const m = { dir, home: join(dir, 'home'), project: join(dir, 'project'), state: join(dir, 'state') };
  // The state folder is left for the gateway to create, owner-only.
  for (const folder of [m.home, m.project]) mkdirSync(folder, { recursive: true });
  m.env = isolatedEnv({
    HOME: m.home,
    USERPROFILE: m.home,
    XDG_CONFIG_HOME: join(m.home, '.config'),
    ANYGPT_DISCOVERY_STATE_DIR: m.state,
  });
  delete m.env.ANYGPT_DISCOVERY_CONFIG;
  return m;
}

/** Write `text` (an object is JSON) to `path`, creating folders. */
function put(path, text) {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, typeof text === 'string' ? text : JSON.stringify(text, null, 2));
  return path;
}

/** A server entry that leaves `marker` behind if it is ever started. */
const touching = (marker) => ({ command: 'sh', args: ['-c', `touch '${marker}'`] });
const memory = () => ({ command: process.execPath, args: [serverPaths.memory] });

/**
 * Every kind of project file, each holding one server `evil` that touches `marker` (and the
 * TS file touching `evaluated` when it is evaluated at all).
 */
function projectFiles(marker, evaluated) {
  const evil = touching(marker);
  const own = { discovery: { servers: [{ name: 'evil', connection: evil }] } };
  return [
    ['.mcp.json', { mcpServers: { evil } }],
    ['.vscode/mcp.json', { servers: { evil } }],
    ['.cursor/mcp.json', { mcpServers: { evil } }],
    ['.zed/settings.json', { context_servers: { evil } }],
    ['.anygpt/mcp-discovery.config.json', own],
    ['.anygpt/mcp-discovery.config.yaml', `discovery:\n  servers:\n    - ${JSON.stringify(own.discovery.servers[0])}\n`],
    [
      'anygpt.config.ts',
      `import { writeFileSync } from 'node:fs'\nwriteFileSync(${JSON.stringify(evaluated)}, 'evaluated')\nexport default ${JSON.stringify(own)}\n`,
    ],
  ];
}

/** Start the gateway of `face` with no arguments in `m.project`; the official client on it. */
async function gateway(face, m, more = {}) {
  const [, command, args] = face;
  const transport = new StdioClientTransport({ command, args, cwd: m.project, env: { ...m.env, ...more }, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const client = new Client({ name: 'consent-tests', version: '0.0.0' });
  await client.connect(transport);
  return { client, stderr: () => stderr, close: () => client.close() };
}

/** Run a CLI command of `face` in `m.project`; { status, stdout, stderr }. */
function run(face, m, args, more = {}) {
  const [, command, prefix] = face;
  return spawnSync(command, [...prefix, ...args], { cwd: m.project, env: { ...m.env, ...more }, encoding: 'utf8', timeout: 60_000 });
}

for (const face of faces) {
  const [name] = face;
  describe(`consent through the ${name}`, () => {
    test('no kind of unapproved project file starts anything; each is named on stderr and in list_mcp_servers', async () => {
      const started = [];
      for (let i = 0; i < projectFiles('', '').length; i++) {
        const m = machine();
        const marker = join(m.dir, 'started');
        const evaluated = join(m.dir, 'evaluated');
        const [file, text] = projectFiles(marker, evaluated)[i];
        const path = put(join(m.project, file), text);
        started.push({ file, path, marker, evaluated, g: await gateway(face, m) });
      }
      try {
        for (const { file, path, g } of started) {
          const { body } = await call(g.client, 'list_mcp_servers');
          assert.deepEqual(body.servers, [], path);
          assert.equal(
            body.hint,
            `Project configs not approved, so not used: ./${file}. The user approves one with \`anygpt-discovery allow <file>\` in the project folder.`,
          );
          assert.ok(body.hint.length < 400, body.hint);
          assert.ok(g.stderr().includes(`${path}: not used: a project config, not approved`), g.stderr());
          assert.ok(g.stderr().includes(`anygpt-discovery allow ${path}`), g.stderr());
        }
        await sleep(GRACE_MS);
        for (const { file, marker, evaluated } of started) {
          assert.equal(existsSync(marker), false, `${file} started its server`);
          assert.equal(existsSync(evaluated), false, `${file} was evaluated`);
        }
      } finally {
        for (const { g } of started) await g.close();
      }
    });

    test('a URL-only project entry with ${VAR}s in its URL and headers contacts nothing until approved', async () => {
      const requests = [];
      const listener = createServer((req, res) => {
        requests.push({ url: req.url, authorization: req.headers.authorization });
        res.writeHead(404).end();
      });
      await new Promise((r) => listener.listen(0, '127.0.0.1', r));
      const { port } = listener.address();
      const m = machine();
      const secrets = { GITHUB_TOKEN: 'ghp_consentTestToken0123456789abcdef', AWS_SECRET_ACCESS_KEY: 'aws-consent-secret-0123456789' };
      const remote = {
        url: `http://127.0.0.1:${port}/mcp?token=\${GITHUB_TOKEN}`,
        headers: { Authorization: 'Bearer ${AWS_SECRET_ACCESS_KEY}' },
      };
      const file = put(join(m.project, '.mcp.json'), { mcpServers: { remote } });
      put(join(m.project, '.vscode/mcp.json'), { servers: { remote2: { type: 'http', ...remote } } });
      const g = await gateway(face, m, secrets);
      try {
        await call(g.client, 'list_mcp_servers');
        await call(g.client, 'search_tools', { query: 'anything' });
        await sleep(GRACE_MS);
        assert.deepEqual(requests, []);
        assert.match(g.stderr(), /\.vscode\/mcp\.json: not used: .*VS Code's workspace trust is kept in its own database, which cannot be read/);
      } finally {
        await g.close();
      }
      // Approved, it does contact the host (the check above could have failed).
      const allowed = run(face, m, ['allow', '--yes', file]);
      assert.equal(allowed.status, 0, allowed.stderr);
      // Shown as written (never expanded): the person judges what the file's author chose.
      assert.ok(allowed.stdout.includes(`remote connects to: http://127.0.0.1:${port}/mcp?token=\${GITHUB_TOKEN}; headers: Authorization: Bearer \${AWS_SECRET_ACCESS_KEY}`), allowed.stdout);
      assert.ok(!allowed.stdout.includes(secrets.GITHUB_TOKEN) && !allowed.stdout.includes(secrets.AWS_SECRET_ACCESS_KEY), allowed.stdout);
      assert.match(allowed.stdout, /reads variables: GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY/);
      const again = await gateway(face, m, secrets);
      try {
        await call(again.client, 'list_mcp_servers');
        assert.ok(await waitFor(() => requests.length > 0, 10_000), 'the approved server is contacted');
        assert.equal(requests[0].authorization, `Bearer ${secrets.AWS_SECRET_ACCESS_KEY}`);
      } finally {
        await again.close();
        listener.close();
      }
    });

    test('allow shows the plan and approves; an edit is not used until approved again, also while serving; deny stops it', async () => {
      const m = machine();
      const marker = join(m.dir, 'started');
      const file = put(join(m.project, '.mcp.json'), { mcpServers: { notes: memory() } });
      const g = await gateway(face, m);
      try {
        assert.deepEqual((await call(g.client, 'list_mcp_servers')).body.servers, []);
        const allowed = run(face, m, ['allow', '--yes']);
        assert.equal(allowed.status, 0, allowed.stderr);
        assert.ok(allowed.stdout.includes(`${file} (claude-code):`), allowed.stdout);
        assert.ok(allowed.stdout.includes(`notes runs: ${process.execPath} ${serverPaths.memory}`), allowed.stdout);
        assert.match(allowed.stdout, /✓ approved \(sha256 [0-9a-f]{12}…\)/);
        const store = join(m.state, 'approvals.json');
        assert.equal(statSync(store).mode & 0o777, 0o600);
        assert.equal(statSync(m.state).mode & 0o077, 0);
        // The running gateway picks the approval up.
        const names = async () => (await call(g.client, 'list_mcp_servers')).body.servers.map((s) => s.name);
        assert.ok(await pollAsync(async () => (await names()).join() === 'notes'), g.stderr());
        assert.equal((await call(g.client, 'list_mcp_servers')).body.hint, undefined);

        // An edit (a `git pull`): the new server does not start; the gateway keeps what it had.
        put(file, { mcpServers: { notes: memory(), evil: touching(marker) } });
        assert.ok(await pollAsync(() => /changed since it was approved/.test(g.stderr())), g.stderr());
        await sleep(GRACE_MS);
        assert.equal(existsSync(marker), false, 'the edited file started its new server');
        assert.deepEqual(await names(), ['notes']);
        const listed = run(face, m, ['list', '--json']);
        assert.equal(listed.status, 0, listed.stderr);
        assert.deepEqual(JSON.parse(listed.stdout).skipped.map((s) => [s.file, s.reason, s.fix]), [
          [file, 'changed', `anygpt-discovery allow ${file}`],
        ]);
        const list = run(face, m, ['allow', '--list', '--json']);
        assert.deepEqual(JSON.parse(list.stdout).approvals.map((a) => [a.file, a.decision, a.state]), [[file, 'allow', 'changed']]);

        // Approved again: it runs (and so the marker shows the check above could fail).
        assert.equal(run(face, m, ['allow', '--yes', '.mcp.json']).status, 0);
        assert.ok(await waitFor(() => existsSync(marker), 10_000), g.stderr());

        // Denied: nothing from it runs.
        const denied = run(face, m, ['deny', file]);
        assert.equal(denied.status, 0, denied.stderr);
        assert.match(denied.stdout, /✗ denied: nothing from it runs/);
        assert.ok(await pollAsync(async () => (await names()).length === 0), g.stderr());
        const { body } = await call(g.client, 'list_mcp_servers');
        assert.ok(body.hint.includes('./.mcp.json'), body.hint);
      } finally {
        await g.close();
      }
    });

    test("Claude Code's record for the folder is honoured without allow: enabled runs, disabled never", async () => {
      const m = machine();
      const disabled = join(m.dir, 'disabled-started');
      const unasked = join(m.dir, 'unasked-started');
      const file = put(join(m.project, '.mcp.json'), {
        mcpServers: { notes: memory(), off: touching(disabled), unasked: touching(unasked) },
      });
      put(join(m.home, '.claude.json'), {
        projects: { [m.project]: { enabledMcpjsonServers: ['notes', 'off'], disabledMcpjsonServers: ['off'] } },
      });
      const g = await gateway(face, m);
      try {
        const { body } = await call(g.client, 'list_mcp_servers');
        assert.deepEqual(body.servers.map((s) => s.name), ['notes']);
        assert.ok(body.hint.includes('./.mcp.json'), 'the server Claude Code did not answer for waits for approval');
        assert.ok(!body.hint.includes(m.project), body.hint);
        assert.ok(await pollAsync(async () => (await call(g.client, 'list_tools', { server: 'notes' })).body.tools?.length > 0, 10_000));
        await sleep(GRACE_MS);
        assert.equal(existsSync(disabled), false);
        assert.equal(existsSync(unasked), false);
      } finally {
        await g.close();
      }
      // Approving the file adds the unasked one; the disabled one still never runs.
      assert.equal(run(face, m, ['allow', '--yes', file]).status, 0);
      const listed = run(face, m, ['list', '--json']);
      assert.deepEqual(JSON.parse(listed.stdout).servers.map((s) => s.name), ['notes', 'unasked']);
      assert.equal(existsSync(disabled), false);
    });

    test("Claude Code's record does not approve another file in its format that an approved config imports", () => {
      const m = machine();
      const marker = join(m.dir, 'imported-started');
      put(join(m.project, 'evil.json'), { mcpServers: { evil: touching(marker) } });
      const own = put(join(m.project, '.anygpt/mcp-discovery.config.json'), {
        discovery: { servers: [], sources: [{ type: 'claude-code', path: '../evil.json' }] },
      });
      put(join(m.home, '.claude.json'), { projects: { [m.project]: { enableAllProjectMcpServers: true } } });
      assert.equal(run(face, m, ['allow', '--yes', own]).status, 0);
      const listed = run(face, m, ['list', '--status', '--json']);
      assert.equal(listed.status, 0, listed.stderr);
      assert.deepEqual(JSON.parse(listed.stdout).servers, []);
      assert.ok(JSON.parse(listed.stdout).skipped.some((s) => s.file.endsWith('evil.json')), listed.stdout);
      assert.equal(existsSync(marker), false, 'the record speaks for ./.mcp.json only');
    });

    test('allow asks for a yes: without a terminal and without --yes it records nothing', () => {
      const m = machine();
      const marker = join(m.dir, 'unconfirmed-started');
      const file = put(join(m.project, '.mcp.json'), { mcpServers: { evil: touching(marker) } });
      const refused = run(face, m, ['allow', file]);
      assert.equal(refused.status, 1, refused.stderr);
      assert.ok(refused.stdout.includes(`evil runs: sh -c "touch '${marker}'"`), 'the plan is shown all the same');
      assert.match(refused.stderr, /not approved: `allow` asks for a yes on a terminal and there is none here; nothing was recorded/);
      assert.deepEqual(JSON.parse(run(face, m, ['allow', '--list', '--json']).stdout).approvals, []);
      run(face, m, ['list']);
      assert.equal(existsSync(marker), false);
    });

    test("~/.claude.json's servers for this folder wait for approval; the user's own servers there do not", () => {
      const m = machine();
      const marker = join(m.dir, 'local-started');
      const claude = put(join(m.home, '.claude.json'), {
        mcpServers: { mine: memory() },
        projects: { [m.project]: { mcpServers: { local: touching(marker) } } },
      });
      const before = run(face, m, ['list', '--json']);
      assert.equal(before.status, 0, before.stderr);
      const listed = JSON.parse(before.stdout);
      assert.deepEqual(listed.servers.map((s) => s.name), ['mine']);
      assert.deepEqual(listed.skipped.map((s) => [s.file, s.section, s.fix]), [
        [claude, `projects.${m.project}`, `anygpt-discovery allow ${claude}`],
      ]);
      assert.equal(existsSync(marker), false);
      const allowed = run(face, m, ['allow', '--yes']);
      assert.equal(allowed.status, 0, allowed.stderr);
      assert.ok(allowed.stdout.includes(`local runs: sh -c "touch '${marker}'"`), allowed.stdout);
      const after = JSON.parse(run(face, m, ['list', '--json']).stdout);
      assert.deepEqual(after.servers.map((s) => s.name), ['local', 'mine']);
      assert.equal(existsSync(marker), true, 'approved, it runs');
    });

    test('a project file appearing while the gateway serves is not used until approved', async () => {
      const m = machine();
      const marker = join(m.dir, 'started');
      const g = await gateway(face, m);
      try {
        assert.equal((await call(g.client, 'list_mcp_servers')).body.hint.startsWith('No servers configured'), true);
        put(join(m.project, '.mcp.json'), { mcpServers: { evil: touching(marker) } });
        assert.ok(await pollAsync(async () => (await call(g.client, 'list_mcp_servers')).body.hint.includes('./.mcp.json')), g.stderr());
        await sleep(GRACE_MS);
        assert.equal(existsSync(marker), false);
      } finally {
        await g.close();
      }
    });

    test('config path: an unapproved project config never wins over the user\'s own, and says why', () => {
      const m = machine();
      const project = put(join(m.project, '.anygpt/mcp-discovery.config.json'), { discovery: { servers: [] } });
      const own = put(join(m.home, '.anygpt/mcp-discovery.config.json'), { discovery: { servers: [] } });
      const before = run(face, m, ['config', 'path']);
      assert.ok(before.stdout.startsWith(`Config file: ${own} (your own config, found by the search order)`), before.stdout);
      assert.ok(before.stdout.includes(`Not used: ${project}: not used: a project config, not approved`), before.stdout);
      assert.match(before.stdout, /an unapproved project config never wins: the file above is used instead/);
      assert.equal(run(face, m, ['allow', '--yes', project]).status, 0);
      const after = JSON.parse(run(face, m, ['config', 'path', '--json']).stdout);
      assert.deepEqual([after.file, after.scope, after.skipped, after.shadowed], [project, 'project', [], [own]]);
      const human = run(face, m, ['config', 'path']).stdout;
      assert.ok(human.includes('a project config you approved; it comes before your own in the search order'), human);
      const sources = JSON.parse(run(face, m, ['config', 'sources', '--json']).stdout);
      assert.equal(sources.origin, project);
    });
  });
}

describe('the npm bin evaluates nothing for commands that need no servers', () => {
  test('--help, --version, completions, allow, deny and config path leave an anygpt.config.ts unevaluated', () => {
    const m = machine();
    const evaluated = join(m.dir, 'evaluated');
    const file = put(
      join(m.project, 'anygpt.config.ts'),
      `import { writeFileSync } from 'node:fs'\nwriteFileSync(${JSON.stringify(evaluated)}, 'evaluated')\nexport default { discovery: { servers: [] } }\n`,
    );
    const npm = faces[1];
    for (const args of [['--help'], ['--version'], ['completions', 'bash'], ['config', 'path'], ['list'], ['allow', '--yes', file], ['allow', '--list'], ['--config', file, '--help'], ['--config', file, 'completions', 'zsh']]) {
      const result = run(npm, m, args);
      assert.equal(result.status, 0, `${args.join(' ')}: ${result.stderr}`);
      if (args[0] === 'allow' && args[2] === file) {
        assert.match(result.stdout, /TypeScript\/JavaScript: code that runs with your rights/);
      }
      assert.equal(existsSync(evaluated), false, `${args.join(' ')} evaluated the config`);
    }
    // Approved (above), a command that reads the config evaluates it: the check could fail.
    assert.equal(run(npm, m, ['list']).status, 0);
    assert.equal(readFileSync(evaluated, 'utf8'), 'evaluated');
  });
});

describe('a served project anygpt.config.ts (npm bin)', () => {
  test('an edit is not evaluated while the gateway serves: it keeps what it had until approved again', async () => {
    const m = machine();
    const evaluated = join(m.dir, 'evaluated-again');
    const file = join(m.project, 'anygpt.config.ts');
    const notes = { name: 'notes', connection: memory() };
    put(file, `export default { discovery: { servers: [${JSON.stringify(notes)}] } }\n`);
    assert.equal(run(faces[1], m, ['allow', '--yes', file]).status, 0);
    const g = await gateway(faces[1], m);
    try {
      const names = async () => (await call(g.client, 'list_mcp_servers')).body.servers.map((s) => s.name);
      assert.deepEqual(await names(), ['notes']);
      put(
        file,
        `import { writeFileSync } from 'node:fs'\nwriteFileSync(${JSON.stringify(evaluated)}, 'x')\nexport default { discovery: { servers: [] } }\n`,
      );
      assert.ok(await pollAsync(() => /changed since it was approved/.test(g.stderr())), g.stderr());
      await sleep(GRACE_MS);
      assert.equal(existsSync(evaluated), false, 'the edited TS file was evaluated');
      assert.deepEqual(await names(), ['notes']);
      // Approved again, it is evaluated and applies.
      assert.equal(run(faces[1], m, ['allow', '--yes', file]).status, 0);
      assert.ok(await pollAsync(async () => (await names()).length === 0), g.stderr());
      assert.equal(existsSync(evaluated), true);
    } finally {
      await g.close();
    }
  });
});

describe('the Node API', () => {
  test('createEngine() neither evaluates an unapproved project TS file nor re-evaluates it once changed', async () => {
    const m = machine();
    const evaluated = join(m.dir, 'evaluated');
    const file = put(
      join(m.project, 'anygpt.config.ts'),
      `import { appendFileSync } from 'node:fs'\nappendFileSync(${JSON.stringify(evaluated)}, 'x')\nexport default { discovery: { servers: [] } }\n`,
    );
    const saved = { cwd: process.cwd(), env: { ...process.env } };
    Object.assign(process.env, {
      HOME: m.home,
      XDG_CONFIG_HOME: m.env.XDG_CONFIG_HOME,
      ANYGPT_DISCOVERY_STATE_DIR: m.state,
      ANYGPT_DISCOVERY_CACHE_DIR: m.env.ANYGPT_DISCOVERY_CACHE_DIR,
    });
    delete process.env.ANYGPT_DISCOVERY_CONFIG;
    process.chdir(m.project);
    try {
      const unapproved = await createEngine();
      assert.equal(existsSync(evaluated), false, 'an unapproved TS file was evaluated');
      assert.equal(unapproved.getConfig().discovery.servers.length, 0);
      await unapproved.close();
      assert.equal(run(faces[1], m, ['allow', '--yes', file]).status, 0);
      const engine = await createEngine();
      try {
        assert.equal(readFileSync(evaluated, 'utf8'), 'x');
        writeFileSync(file, readFileSync(file, 'utf8') + '// changed\n');
        await assert.rejects(engine.reload(), (error) => {
          assert.equal(error.code, 'CONFIGURATION_ERROR');
          assert.match(error.message, /not approved in its current version/);
          assert.ok(error.message.includes(`anygpt-discovery allow ${file}`), error.message);
          return true;
        });
        assert.equal(readFileSync(evaluated, 'utf8'), 'x', 'the changed file was evaluated');
      } finally {
        await engine.close();
      }
      // A JSON project config the same way: a changed one is not read into the engine.
      const marker = join(m.dir, 'started');
      const json = put(join(m.project, '.anygpt/mcp-discovery.config.json'), { discovery: { servers: [{ name: 'notes', connection: memory() }] } });
      assert.equal(run(faces[1], m, ['allow', '--yes', json]).status, 0);
      const fromJson = await createEngine();
      try {
        assert.deepEqual((await fromJson.listServers()).map((s) => s.name), ['notes']);
        put(json, { discovery: { servers: [{ name: 'evil', connection: touching(marker) }] } });
        await assert.rejects(fromJson.reload(), (error) => error.code === 'CONFIGURATION_ERROR' && /changed since it was approved/.test(error.message));
        assert.deepEqual((await fromJson.listServers()).map((s) => s.name), ['notes']);
        assert.equal(existsSync(marker), false);
      } finally {
        await fromJson.close();
      }
    } finally {
      process.chdir(saved.cwd);
      for (const key of Object.keys(process.env)) if (!(key in saved.env)) delete process.env[key];
      Object.assign(process.env, saved.env);
    }
  });
});

/** Poll an async predicate every 100 ms for up to 10 s. */
async function pollAsync(predicate, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await predicate()) return true;
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}
