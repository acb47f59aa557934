// Replicas sharing one sign-in: two `serve --http` replicas share a real redis-server (with a
// store key) and one downstream server behind OAuth (our fixture authorization server, not
// per-user). The first replica's call signs in (the BROWSER script approves at once); the
// other replica, which has no browser at all, then calls the same server with that sign-in.
// When the server makes every access token stale (`/admin/expire`), both replicas call at once
// and the rotating refresh token is spent once: one refresh grant, both calls answered.
// No token or client secret is in either replica's home or state folder: they are in the store,
// sealed.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { debugBinary, metaCall, startRedis, startReplica, stopReplica } from './cluster.mjs';
import { isolatedEnv, root, startOAuthServer, tempDir } from './helpers.mjs';

const browser = join(root, '__test__/fixtures/approve-browser.mjs');

/** Every file under `dir`, as text. */
function filesUnder(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => readFileSync(join(entry.parentPath, entry.name), 'utf8'));
}

let redis;
let oauth;
let machineOAuth;
const replicas = [];
const MACHINE_CLIENT = `machine-client:machine-secret-${randomBytes(16).toString('hex')}`;

before(async () => {
  redis = await startRedis();
  oauth = await startOAuthServer();
  machineOAuth = await startOAuthServer({ MACHINE_CLIENT });
});

after(async () => {
  for (const replica of replicas) await stopReplica(replica);
  oauth?.child.kill();
  machineOAuth?.child.kill();
  await redis?.stop();
});

/** A config of the server `secure` at `url` (`oauth`: its connection.oauth) and the shared store. */
function sharedConfig(url, oauthSpec = undefined) {
  const config = join(tempDir('anygpt-shared-sign-in-'), 'config.json');
  writeFileSync(config, JSON.stringify({
    discovery: {
      servers: [{ name: 'secure', startupTimeoutMs: 8000, timeoutMs: 20000, connection: { type: 'http', url, ...(oauthSpec ? { oauth: oauthSpec } : {}) } }],
      store: { url: redis.url, key: randomBytes(32).toString('base64'), prefix: `signin${randomBytes(3).toString('hex')}` },
    },
  }));
  return config;
}

const whoami = (replica) => metaCall(replica.url, 'execute_tool', { server: 'secure', tool: 'whoami', arguments: {} });

test('replicas sharing a store sign in once and refresh once', { timeout: 120_000 }, async () => {
  const config = sharedConfig(oauth.url);
  const modeFile = join(tempDir(), 'browser-mode');
  writeFileSync(modeFile, 'approve');
  const withBrowser = { BROWSER: `${JSON.stringify(process.execPath)} ${JSON.stringify(browser)}`, BROWSER_MODE_FILE: modeFile, ANYGPT_LOG: 'info' };
  // The second replica cannot sign in at all: its browser walks away.
  const noBrowser = { BROWSER: withBrowser.BROWSER, BROWSER_MODE: 'ignore', ANYGPT_LOG: 'info' };
  const a = await startReplica('a', config, { env: withBrowser });
  replicas.push(a);
  const b = await startReplica('b', config, { env: noBrowser });
  replicas.push(b);

  const first = await whoami(a);
  assert.match(JSON.stringify(first.answer), /signed-in user/, JSON.stringify(first.answer));
  const second = await whoami(b);
  assert.match(JSON.stringify(second.answer), /signed-in user/, `${JSON.stringify(second.answer)}\n${b.stderr()}`);
  let stats = await oauth.admin('stats');
  assert.equal(stats.authorizations, 1, 'one sign-in for both replicas');
  assert.equal(stats.codeGrants, 1);
  assert.equal(stats.registrations, 1, 'one registered client for both replicas');

  // Every access token goes stale at the server: both replicas call at once, one refreshes.
  await oauth.admin('expire');
  const [again, also] = await Promise.all([whoami(a), whoami(b)]);
  assert.match(JSON.stringify(again.answer), /signed-in user/, `${JSON.stringify(again.answer)}\n${a.stderr()}`);
  assert.match(JSON.stringify(also.answer), /signed-in user/, `${JSON.stringify(also.answer)}\n${b.stderr()}`);
  stats = await oauth.admin('stats');
  assert.equal(stats.refreshGrants, 1, 'the rotating refresh token is spent once across both replicas');
  assert.equal(stats.refused, 0, 'no replica spent a refresh token another one had rotated');
  assert.equal(stats.authorizations, 1, 'nobody had to sign in again');

  // `auth status` and `auth logout`, run anywhere with the same config, see the store's sign-in.
  const cli = (...args) => spawnSync(debugBinary, ['--config', config, ...args], { env: isolatedEnv(), encoding: 'utf8', timeout: 60_000 });
  const status = cli('auth', 'status', 'secure');
  assert.match(status.stdout, /secure: signed in .*tokens in the shared store \(redis:\/\/127\.0\.0\.1:\d+\)/, status.stdout + status.stderr);
  const logout = cli('auth', 'logout', 'secure');
  assert.match(logout.stdout, /secure: signed out/, logout.stdout + logout.stderr);
  assert.match(cli('auth', 'status', 'secure').stdout, /secure: not signed in/);

  // Nothing of the sign-in is on either replica's disk: it is sealed in the store.
  const tokenShaped = /\b(at|rt|secret)-[A-Za-z0-9_-]{30,}/;
  for (const replica of [a, b]) {
    for (const dir of [replica.env.HOME, replica.env.ANYGPT_DISCOVERY_STATE_DIR]) {
      for (const text of filesUnder(dir)) assert.doesNotMatch(text, tokenShaped);
    }
    assert.doesNotMatch(replica.stderr(), tokenShaped);
  }
});

test('replicas sharing a store share one client-credentials token', { timeout: 120_000 }, async () => {
  const [id, secret] = MACHINE_CLIENT.split(':');
  const config = sharedConfig(machineOAuth.url, { grant: 'clientCredentials', clientId: id, clientSecret: secret });
  const started = await Promise.all(['c', 'd'].map((name) => startReplica(name, config, { env: { ANYGPT_LOG: 'info' } })));
  replicas.push(...started);
  // Both at once: one grant, whose token the other replica takes from the store.
  const answers = await Promise.all(started.map(whoami));
  for (const [i, answer] of answers.entries()) {
    assert.match(JSON.stringify(answer.answer), /signed-in user machine/, `${JSON.stringify(answer.answer)}\n${started[i].stderr()}`);
  }
  const stats = await machineOAuth.admin('stats');
  assert.equal(stats.clientCredentialsGrants, 1, 'one grant for both replicas');
  for (const replica of started) assert.doesNotMatch(replica.stderr(), new RegExp(secret));
});
