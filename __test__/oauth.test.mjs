// Servers behind the MCP authorization spec: the gateway signs in (OAuth 2.1 with PKCE and
// dynamic registration) against a loopback authorization server of ours, with BROWSER set to
// a script that approves at once (or walks away), then refreshes silently, asks for more
// scopes when the server says so, reports `needs sign-in` when nobody signs in, and forgets
// its tokens on `auth logout`; a restarted gateway signs in again with the client it
// registered before; with no OS keychain answering, tokens go to the owner-only file. No
// token or client secret ever shows in a log line, an answer, the audit log or a snapshot.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { bin, call, isolatedEnv, referenceServer, root, startGateway, startOAuthServer, tempDir, writeConfig } from './helpers.mjs';

/** The token store's file stem for a server (`paths::server_file_stem`): its safe name and
 * the low 32 bits of the FNV-1a 64 hash of the name. */
function serverFileStem(name) {
  let hash = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(name)) hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return `${name}-${(hash & 0xffffffffn).toString(16).padStart(8, '0')}`;
}

const browser = join(root, '__test__/fixtures/approve-browser.mjs');

/** A gateway with the protected server `secure` and a stdio `memory` beside it. Tokens go to
 * the file unless `tokenStore` says `auto` (then `env` may steer the keychain). */
async function setup({ startupTimeoutMs = 8000, tokenStore = 'file', env: moreEnv = {}, oauthEnv = {} } = {}) {
  const oauth = await startOAuthServer(oauthEnv);
  const state = tempDir('anygpt-oauth-state-');
  const cache = tempDir('anygpt-oauth-cache-');
  const modeFile = join(tempDir(), 'browser-mode');
  writeFileSync(modeFile, 'approve');
  const config = writeConfig({
    discovery: {
      servers: [
        { name: 'secure', startupTimeoutMs, timeoutMs: 20000, connection: { type: 'http', url: oauth.url } },
        referenceServer('memory'),
      ],
    },
  });
  const env = {
    ANYGPT_DISCOVERY_STATE_DIR: state,
    ANYGPT_DISCOVERY_CACHE_DIR: cache,
    BROWSER: `${JSON.stringify(process.execPath)} ${JSON.stringify(browser)}`,
    BROWSER_MODE_FILE: modeFile,
    ANYGPT_LOG: 'debug',
    ANYGPT_DISCOVERY_TOKEN_STORE: tokenStore,
    ...moreEnv,
  };
  const gateways = [await startGateway(config, env)];
  const gateway = {
    get client() {
      return gateways.at(-1).client;
    },
    stderr: () => gateways.map((g) => g.stderr()).join('\n'),
  };
  /** Stop the gateway and start another on the same config and state. */
  const restart = async () => {
    await gateways.at(-1).client.close();
    gateways.push(await startGateway(config, env));
  };
  const answers = [];
  const run = async (server, tool, args = {}) => {
    const result = await gateway.client.callTool({ name: 'execute_tool', arguments: { server, tool, arguments: args } });
    answers.push(JSON.stringify(result));
    return result;
  };
  const cli = (...args) => cliWith({}, ...args);
  const cliWith = (extraEnv, ...args) => {
    const done = spawnSync(process.execPath, [bin, '--config', config, ...args], { env: isolatedEnv({ ...env, ...extraEnv }), encoding: 'utf8', timeout: 60000 });
    answers.push(done.stdout, done.stderr);
    return done;
  };
  const tokenFile = join(state, 'oauth', `${serverFileStem('secure')}.json`);
  const seenTokens = new Set();
  /** The token file's contents, or null. */
  const stored = () => (existsSync(tokenFile) ? JSON.parse(readFileSync(tokenFile, 'utf8')) : null);
  /** Every token the store holds now (kept, with client secrets, for the leak check). */
  const storedTokens = () => {
    const { resources = {}, clients = {} } = stored() ?? {};
    const tokens = Object.values(resources).flatMap((c) => [c.token_response?.access_token, c.token_response?.refresh_token]).filter(Boolean);
    tokens.forEach((t) => seenTokens.add(t));
    Object.values(clients).forEach((c) => c.client_secret && seenTokens.add(c.client_secret));
    return tokens;
  };
  const close = async () => {
    await gateways.at(-1).client.close();
    oauth.child.kill();
  };
  return { oauth, gateway, restart, run, cli, cliWith, state, cache, modeFile, tokenFile, stored, storedTokens, seenTokens, answers, close };
}

/** Every file under `dir` except the token store, as text. */
function filesUnder(dir, skip) {
  const out = [];
  const walk = (d) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (path !== skip) out.push([path, readFileSync(path, 'latin1')]);
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

test('first sign-in, silent refresh, step-up, revoked refresh token, login and logout; no token leaks', { timeout: 120000 }, async () => {
  const s = await setup();
  try {
    // First use: 401 → discovery → dynamic registration → browser → PKCE code → token.
    const first = await s.run('secure', 'whoami');
    assert.equal(first.isError, undefined, JSON.stringify(first));
    assert.equal(first.content[0].text, 'signed-in user');
    let stats = await s.oauth.admin('stats');
    assert.equal(stats.registrations, 1);
    assert.equal(stats.codeGrants, 1);
    assert.equal(stats.scopesAsked[0], 'read', 'the scope named by the 401 challenge');
    assert.equal(s.storedTokens().length, 2);
    if (process.platform !== 'win32') assert.equal(statSync(s.tokenFile).mode & 0o777, 0o600);

    // The access token expires: refreshed silently, no second sign-in.
    await s.oauth.admin('expire');
    const refreshed = await s.run('secure', 'whoami');
    assert.equal(refreshed.content[0].text, 'signed-in user', JSON.stringify(refreshed));
    stats = await s.oauth.admin('stats');
    assert.equal(stats.refreshGrants, 1);
    assert.equal(stats.authorizations, 1);
    s.storedTokens();

    // A tool that needs more scope: 403 insufficient_scope → sign in again for `read admin`.
    const admin = await s.run('secure', 'admin_report');
    assert.equal(admin.content[0].text, 'admin report', JSON.stringify(admin));
    stats = await s.oauth.admin('stats');
    assert.equal(stats.authorizations, 2);
    assert.equal(stats.scopesAsked.at(-1), 'read admin');
    s.storedTokens();

    // The refresh token is revoked and nobody signs in: `needs sign-in` with the fix, while
    // the other server works on.
    writeFileSync(s.modeFile, 'ignore');
    await s.oauth.admin('revoke');
    const refused = await s.run('secure', 'whoami');
    assert.equal(refused.isError, true);
    const refusal = JSON.parse(refused.content[0].text).error;
    assert.equal(refusal.code, 'SERVER_CONNECTION_ERROR');
    assert.match(refusal.message, /needs sign-in/);
    assert.match(refusal.message, /anygpt-discovery auth login secure/);
    const memory = await s.run('memory', 'read_graph');
    assert.equal(memory.isError, undefined, JSON.stringify(memory));
    // The reconnect waits for the sign-in part of its startup budget, then says why.
    let secure;
    for (const until = Date.now() + 20000; Date.now() < until; await new Promise((r) => setTimeout(r, 250))) {
      const { body } = await call(s.gateway.client, 'list_mcp_servers');
      secure = body.servers.find((x) => x.name === 'secure');
      if (secure.status === 'needs sign-in') break;
    }
    assert.equal(secure.status, 'needs sign-in', JSON.stringify(secure));
    assert.match(secure.error ?? JSON.stringify(secure), /auth login secure/);

    // `auth login` from a terminal fixes it; the running gateway picks the tokens up.
    writeFileSync(s.modeFile, 'approve');
    const login = s.cli('auth', 'login', 'secure');
    assert.equal(login.status, 0, login.stderr);
    assert.match(login.stdout, /secure: signed in/);
    s.storedTokens();
    let again;
    const deadline = Date.now() + 30000;
    do {
      again = await s.run('secure', 'whoami');
      if (!again.isError) break;
      await new Promise((r) => setTimeout(r, 500));
    } while (Date.now() < deadline);
    assert.equal(again.content[0].text, 'signed-in user', JSON.stringify(again));
    s.storedTokens();

    const status = s.cli('auth', 'status');
    assert.equal(status.status, 0, status.stderr);
    assert.match(status.stdout, /secure: signed in/);

    const logout = s.cli('auth', 'logout', 'secure');
    assert.equal(logout.status, 0, logout.stderr);
    assert.match(logout.stdout, /^secure: signed out \(its tokens and registered client are deleted\)\n$/, 'the keychain is not asked with the file store');
    assert.equal(existsSync(s.tokenFile), false);
    assert.match(s.cli('auth', 'status', 'secure').stdout, /secure: not signed in/);
  } finally {
    await s.close();
  }
  // Tokens and the registered client's secret.
  assert.ok(s.seenTokens.size >= 5, `secrets seen: ${s.seenTokens.size}`);
  assertNoLeaks(s);
});

/** The bytes of every token and client secret the store ever held: in no log line (debug),
 * answer, audit line, snapshot or other file. */
function assertNoLeaks(s) {
  const texts = [
    ['gateway stderr', s.gateway.stderr()],
    ...s.answers.map((a, i) => [`answer ${i}`, a]),
    ...filesUnder(s.state, s.tokenFile),
    ...filesUnder(s.cache, null),
  ];
  assert.ok(texts.some(([where]) => where.includes('audit')), 'the audit log was checked');
  for (const secret of s.seenTokens) {
    for (const [where, text] of texts) {
      assert.ok(!text.includes(secret), `a token or client secret leaked into ${where}`);
    }
  }
}

test('an access token a server hands back in resource links, embedded resources or glued text never reaches the model', { timeout: 120000 }, async () => {
  const s = await setup();
  try {
    const result = await s.run('secure', 'links');
    assert.equal(result.isError, undefined, JSON.stringify(result));
    const [accessToken] = s.storedTokens();
    assert.ok(accessToken, 'signed in: the store holds the access token');
    const [link, embedded] = result.content;
    assert.equal(link.type, 'resource_link');
    assert.equal(link.uri, 'https://files.example.com/***/list');
    assert.equal(link.name, 'files-***');
    assert.equal(link.description, 'token=***;');
    assert.equal(embedded.resource.uri, 'https://files.example.com/***/readme');
    assert.equal(embedded.resource.text, 'Bearer ***');
    const text = JSON.stringify(result);
    assert.ok(!text.includes(accessToken), `the live access token reached the model:\n${text}`);
  } finally {
    await s.close();
  }
  assertNoLeaks(s);
});

test('a restarted gateway signs in with the client it registered before, and registers again once it is refused', { timeout: 120000 }, async () => {
  const s = await setup();
  try {
    assert.equal((await s.run('secure', 'whoami')).content[0].text, 'signed-in user');
    const [issuer, client] = Object.entries(s.stored().clients)[0];
    assert.equal(issuer, s.oauth.base);
    assert.match(client.client_secret, /^secret-/);
    assert.match(client.redirect_uri, /^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    s.storedTokens();

    // Restarted with its tokens revoked: a new sign-in, with the client kept from before.
    await s.oauth.admin('revoke');
    await s.restart();
    const again = await s.run('secure', 'whoami');
    assert.equal(again.content[0].text, 'signed-in user', JSON.stringify(again));
    let stats = await s.oauth.admin('stats');
    assert.equal(stats.registrations, 1, 'one registration across the restart');
    assert.equal(stats.codeGrants, 2);
    assert.equal(Object.values(s.stored().clients)[0].client_id, client.client_id);
    s.storedTokens();

    // The authorization server forgets the client: the refresh is refused with
    // invalid_client, the client is dropped and the sign-in registers once more.
    await s.oauth.admin('forget-clients');
    await s.oauth.admin('expire');
    const fresh = await s.run('secure', 'whoami');
    assert.equal(fresh.content[0].text, 'signed-in user', JSON.stringify(fresh));
    stats = await s.oauth.admin('stats');
    assert.ok(stats.clientsRefused >= 1, JSON.stringify(stats));
    assert.equal(stats.registrations, 2);
    const replaced = Object.values(s.stored().clients)[0];
    assert.notEqual(replaced.client_id, client.client_id);
    s.storedTokens();

    // Forgotten between the sign-in page and the code exchange: the exchange is refused with
    // invalid_client, and the same call signs in once more with a new registration.
    await s.oauth.admin('revoke');
    await s.oauth.admin('forget-clients-at-next-code');
    const before = await s.oauth.admin('stats');
    const retried = await s.run('secure', 'whoami');
    assert.equal(retried.content[0].text, 'signed-in user', JSON.stringify(retried));
    stats = await s.oauth.admin('stats');
    assert.equal(stats.registrations, 3);
    assert.equal(stats.authorizations, before.authorizations + 2);
    assert.equal(stats.clientsRefused, before.clientsRefused + 1);
    assert.notEqual(Object.values(s.stored().clients)[0].client_id, replaced.client_id);
    s.storedTokens();

    // `auth logout` forgets the client too.
    assert.equal(s.cli('auth', 'logout', 'secure').status, 0);
    assert.equal(existsSync(s.tokenFile), false);
  } finally {
    await s.close();
  }
  assert.ok(s.seenTokens.size >= 9, `secrets seen: ${s.seenTokens.size}`);
  assertNoLeaks(s);
});

test('with no OS keychain answering, tokens go to the owner-only file, said once, within the timeout', { timeout: 120000 }, async () => {
  // No Secret Service here (nor in CI): the session bus address names a socket nobody
  // listens on. macOS and Windows ignore it and use their keychain.
  const deadBus = `unix:path=${join(tempDir(), 'no-bus')}`;
  const s = await setup({ tokenStore: 'auto', env: { DBUS_SESSION_BUS_ADDRESS: deadBus } });
  const linux = process.platform === 'linux';
  try {
    assert.equal((await s.run('secure', 'whoami')).content[0].text, 'signed-in user');
    const said = s.gateway.stderr().match(/sign-in tokens go to owner-only files in [^\n]*/g) ?? [];
    if (linux) {
      assert.equal(existsSync(s.tokenFile), true);
      assert.equal(statSync(s.tokenFile).mode & 0o777, 0o600);
      assert.equal(said.length, 1, s.gateway.stderr());
      assert.match(said[0], /the OS keychain failed/);
      assert.ok(said[0].includes(join(s.state, 'oauth')), said[0]);
    } else {
      assert.equal(existsSync(s.tokenFile), false, 'the keychain holds the tokens');
      assert.equal(said.length, 0);
    }
    s.storedTokens();
    const status = s.cli('auth', 'status', 'secure');
    assert.equal(status.status, 0, status.stderr);
    assert.match(status.stdout, linux ? /tokens in .*oauth.*\.json \(the OS keychain failed: / : /tokens in the OS keychain/);

    // A bus that takes the connection and never answers: one timeout (3 s), then the file.
    if (linux) {
      const socket = join(tempDir(), 'silent-bus');
      const silent = createNetServer(() => {});
      await new Promise((resolve) => silent.listen(socket, resolve));
      try {
        const started = Date.now();
        const hung = s.cliWith({ DBUS_SESSION_BUS_ADDRESS: `unix:path=${socket}` }, 'auth', 'status', 'secure');
        const took = Date.now() - started;
        assert.equal(hung.status, 0, hung.stderr);
        assert.match(hung.stdout, /secure: signed in .*tokens in .*\(the OS keychain failed: it did not answer within 3 s\)/);
        assert.ok(took >= 2900 && took < 15000, `took ${took} ms`);
        assert.equal((hung.stderr.match(/sign-in tokens go to owner-only files/g) ?? []).length, 1, hung.stderr);
      } finally {
        silent.close();
      }
    }

    // Signing out deletes the file, and says the keychain could not be checked for a copy.
    const logout = s.cli('auth', 'logout', 'secure');
    assert.equal(logout.status, 0, logout.stderr);
    assert.match(logout.stdout, /secure: signed out/);
    if (linux) assert.match(logout.stdout, /the OS keychain was not checked \(the OS keychain failed: /);
    else assert.doesNotMatch(logout.stdout, /not checked/);
    assert.equal(existsSync(s.tokenFile), false);
    assert.match(s.cli('auth', 'status', 'secure').stdout, /secure: not signed in/);
  } finally {
    await s.close();
  }
  assertNoLeaks(s);
});

test('a 401 with another scheme than Bearer is reported as it is, and no browser opens', async () => {
  const { createServer } = await import('node:http');
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(401, { 'www-authenticate': 'Basic realm="corp"' }).end('no'));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const opened = join(tempDir(), 'browser-opened');
  const config = writeConfig({
    discovery: { servers: [{ name: 'basic', startupTimeoutMs: 3000, connection: { type: 'http', url: `http://127.0.0.1:${server.address().port}/mcp` } }] },
  });
  const gateway = await startGateway(config, { BROWSER: `touch ${JSON.stringify(opened)}` });
  try {
    const result = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: 'basic', tool: 'x', arguments: {} } });
    assert.equal(result.isError, true);
    const text = result.content[0].text;
    assert.match(text, /401 Unauthorized \(Basic realm=\\?"corp\\?"\)/, text);
    assert.doesNotMatch(text, /sign-in/);
    assert.equal(existsSync(opened), false, 'no browser was opened');
  } finally {
    await gateway.client.close();
    server.close();
  }
});

/** The arguments each run of the BROWSER script got, from its BROWSER_ARGV_FILE. */
function browserRuns(file) {
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line)) : [];
}

test('a sign-in page that is not https (or http to this machine) is refused, naming the server, and nothing opens', { timeout: 60000 }, async () => {
  const hostile = {
    'as-file': 'file:///etc/passwd?x=1',
    'as-js': 'javascript:alert(document.cookie)//',
    'as-data': 'data:text/html,<script>alert(1)</script>',
  };
  const servers = await Promise.all(Object.values(hostile).map((endpoint) => startOAuthServer({ AUTHORIZATION_ENDPOINT: endpoint })));
  const argvFile = join(tempDir(), 'browser-argv');
  const config = writeConfig({
    discovery: {
      servers: Object.keys(hostile).map((name, i) => ({ name, startupTimeoutMs: 5000, connection: { type: 'http', url: servers[i].url } })),
    },
  });
  const env = {
    ANYGPT_DISCOVERY_STATE_DIR: tempDir(),
    ANYGPT_DISCOVERY_TOKEN_STORE: 'file',
    BROWSER: `${JSON.stringify(process.execPath)} ${JSON.stringify(browser)}`,
    BROWSER_ARGV_FILE: argvFile,
  };
  const gateway = await startGateway(config, env);
  try {
    for (const [name, endpoint] of Object.entries(hostile)) {
      const result = await gateway.client.callTool({ name: 'execute_tool', arguments: { server: name, tool: 'whoami', arguments: {} } });
      assert.equal(result.isError, true, JSON.stringify(result));
      const text = result.content[0].text;
      const scheme = endpoint.slice(0, endpoint.indexOf(':') + 1);
      assert.match(text, new RegExp(`the sign-in page of ${name} is not opened`), text);
      assert.ok(text.includes(`\`${scheme}\` address`), text);
      assert.ok(!text.includes('passwd') && !text.includes('alert'), `the address itself is not quoted: ${text}`);
    }
    assert.deepEqual(browserRuns(argvFile), [], 'no browser ran');
    for (const server of servers) assert.equal((await server.admin('stats')).registrations, 0, 'no client registered for a page never opened');
  } finally {
    await gateway.client.close();
    for (const server of servers) server.child.kill();
  }
});

test('the sign-in URL reaches BROWSER as one argument, intact, with & and " in it', { timeout: 60000 }, async () => {
  const argvFile = join(tempDir(), 'browser-argv');
  const s = await setup({ env: { BROWSER_ARGV_FILE: argvFile }, oauthEnv: { AUTHORIZATION_ENDPOINT: '{base}/authorize?tenant=a&b;c&quote="x"' } });
  try {
    const signedIn = await s.run('secure', 'whoami');
    assert.equal(signedIn.content[0].text, 'signed-in user', JSON.stringify(signedIn));
    const runs = browserRuns(argvFile);
    assert.equal(runs.length, 1);
    assert.equal(runs[0].length, 1, `one argument: ${JSON.stringify(runs[0])}`);
    const [opened] = runs[0];
    const shown = /sign in to secure in your browser: (\S+)/.exec(s.gateway.stderr())?.[1];
    assert.equal(opened, shown, 'the URL opened is the one shown');
    const url = new URL(opened);
    assert.equal(url.origin + url.pathname, `${s.oauth.base}/authorize`);
    assert.equal(url.searchParams.get('tenant'), 'a');
    assert.equal(url.searchParams.get('quote'), '"x"');
    assert.ok(url.searchParams.has('b;c'));
    for (const param of ['client_id', 'state', 'code_challenge', 'redirect_uri', 'resource']) assert.ok(url.searchParams.get(param), `${param} survived`);
  } finally {
    await s.close();
  }
});

test('a background start of a server nobody used opens no browser; its first call does', { timeout: 60000 }, async () => {
  const argvFile = join(tempDir(), 'browser-argv');
  const s = await setup({ env: { BROWSER_ARGV_FILE: argvFile } });
  try {
    let secure;
    for (const until = Date.now() + 20000; Date.now() < until; await new Promise((r) => setTimeout(r, 200))) {
      const { body } = await call(s.gateway.client, 'list_mcp_servers');
      secure = body.servers.find((x) => x.name === 'secure');
      if (secure.status === 'needs sign-in') break;
    }
    assert.equal(secure.status, 'needs sign-in', JSON.stringify(secure));
    assert.match(JSON.stringify(secure), /the first call of one of secure's tools opens its sign-in page, or run `anygpt-discovery auth login secure`/);
    // Time for a browser the background connect might still start.
    await new Promise((r) => setTimeout(r, 1000));
    assert.deepEqual(browserRuns(argvFile), []);
    assert.equal((await s.oauth.admin('stats')).authorizations, 0);
    // The CLI tells it as its own status too (not ✓ with "Error"), and opens nothing either.
    const listed = s.cli('list', '--status');
    assert.equal(listed.status, 0, listed.stderr);
    assert.match(listed.stdout, /✗ secure\n  Status: Needs sign-in\n  Reason: needs sign-in: the first call/, listed.stdout);
    const json = JSON.parse(s.cli('list', '--json').stdout);
    assert.equal(json.servers.find((x) => x.name === 'secure').status, 'needs sign-in', JSON.stringify(json));
    assert.deepEqual(browserRuns(argvFile), []);
    // A call needs it: now the sign-in starts, and the call is answered.
    const first = await s.run('secure', 'whoami');
    assert.equal(first.content[0].text, 'signed-in user', JSON.stringify(first));
    assert.equal(browserRuns(argvFile).length, 1);
  } finally {
    await s.close();
  }
});

test('three idle connections to the loopback listener do not hold up the sign-in callback', { timeout: 60000 }, async (t) => {
  const timings = join(tempDir(), 'callback-ms');
  const s = await setup({ env: { BROWSER_IDLE_CONNECTIONS: '3', BROWSER_CALLBACK_MS_FILE: timings } });
  try {
    const signedIn = await s.run('secure', 'whoami');
    assert.equal(signedIn.content[0].text, 'signed-in user', JSON.stringify(signedIn));
    const [took] = readFileSync(timings, 'utf8').trim().split('\n').map(Number);
    t.diagnostic(`callback behind 3 idle connections: ${took} ms`);
    assert.ok(took < 1000, `the callback took ${took} ms behind 3 idle connections`);
  } finally {
    await s.close();
  }
});
