// RFC 8693 token exchange for a per-user server (`oauth.tokenExchange`), end to end: two
// `serve --http` replicas sharing a real redis-server; team users with JWTs from a key this
// test makes; one downstream MCP server whose authorization server is also the team's identity
// provider (the oauth fixture with TEAM_JWKS: it verifies the JWT it is given and issues an
// access token of its subject, recording which user's bearer each MCP request carries).
// Each caller's call runs with a token exchanged from their own — no sign-in link — once per
// presented token across both replicas; a refusal is a clear, bounded error; no token in a log.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startRedis } from './cluster.mjs';
import { answerOf, bin, exited, isolatedEnv, listening, printedMatch, raw2026, root, signedJwt, signingKey, tempDir, writeConfig } from './helpers.mjs';

const ISSUER = 'https://id.exchange.test';
const AUDIENCE = 'anygpt-exchange-test';
const SECRET = `gateway-secret-${randomBytes(12).toString('hex')}`;

describe('token exchange: each caller reaches the per-user server with a token exchanged from their own', () => {
  const dir = tempDir('anygpt-exchange-');
  const key = signingKey('exchange-key-1');
  let issued = 0;
  /** A fresh team token of `subject` (each one differs: its `jti`). */
  const teamToken = (subject) => {
    const now = Math.floor(Date.now() / 1000);
    return signedJwt(key, { iss: ISSUER, sub: subject, aud: AUDIENCE, iat: now, exp: now + 600, jti: `t${++issued}` });
  };
  const alice = teamToken('alice');
  const bob = teamToken('bob');
  let redis;
  let fixture;
  let fixtureBase;
  let a;
  let b;

  const stats = async () => (await fetch(`${fixtureBase}/admin/stats`)).json();

  /** `whoami` of the per-user server as a 2026-07-28 client holding `token`; its JSON-RPC answer. */
  async function whoami(url, token, server = 'tickets') {
    const params = { name: 'execute_tool', arguments: { server, tool: 'whoami' } };
    return answerOf(await raw2026(url, 'tools/call', params, { authorization: `Bearer ${token}` }));
  }

  /** The text of a `whoami` answer that must have run. */
  async function ranAs(url, token) {
    const answer = await whoami(url, token);
    assert.ok(answer.result && answer.result.isError !== true, JSON.stringify(answer));
    return answer.result.content[0].text;
  }

  before(async () => {
    redis = await startRedis();
    fixture = spawn(process.execPath, [join(root, '__test__/fixtures/oauth-server.mjs')], {
      env: {
        ...process.env,
        TEAM_JWKS: JSON.stringify({ keys: [key.jwk] }),
        TEAM_ISSUER: ISSUER,
        TEAM_AUDIENCE: AUDIENCE,
        EXCHANGE_CLIENT: `gateway:${SECRET}`,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [, port] = await printedMatch(fixture, 'stdout', /listening (\d+)/);
    fixtureBase = `http://127.0.0.1:${port}`;
    const jwks = join(dir, 'jwks.json');
    writeFileSync(jwks, JSON.stringify({ keys: [key.jwk] }));
    const config = writeConfig(
      {
        discovery: {
          servers: [
            {
              name: 'tickets',
              connection: {
                type: 'http',
                url: `${fixtureBase}/mcp`,
                oauth: { perUser: true, clientId: 'gateway', clientSecret: '${EXCHANGE_SECRET}', tokenExchange: { tokenEndpoint: `${fixtureBase}/token` } },
              },
            },
          ],
          http: { auth: { issuers: [{ issuer: ISSUER, jwksFile: jwks, audience: AUDIENCE }] } },
          store: { url: redis.url, key: randomBytes(32).toString('base64') },
        },
      },
      dir,
    );
    const replica = () =>
      listening(
        spawn(process.execPath, [bin, 'serve', '--http', '127.0.0.1:0', '--config', config], {
          env: isolatedEnv({ EXCHANGE_SECRET: SECRET }),
          stdio: ['ignore', 'ignore', 'pipe'],
        }),
      );
    [a, b] = await Promise.all([replica(), replica()]);
  });

  after(async () => {
    for (const child of [a?.child, b?.child]) child?.kill('SIGTERM');
    await Promise.all([a?.exit, b?.exit]);
    fixture?.kill('SIGTERM');
    if (fixture) await exited(fixture);
    await redis?.stop();
  });

  test('each caller runs as themselves at once, with no sign-in link, exchanged once per token across replicas', async () => {
    assert.equal(await ranAs(a.url, alice), 'signed-in user alice');
    assert.equal(await ranAs(b.url, bob), 'signed-in user bob');
    assert.equal((await stats()).exchanges, 2);
    // The same tokens again, on the other replicas: the exchanged tokens are reused from the store.
    assert.equal(await ranAs(b.url, alice), 'signed-in user alice');
    assert.equal(await ranAs(a.url, bob), 'signed-in user bob');
    const after = await stats();
    assert.equal(after.exchanges, 2, 'no exchange for a token exchanged before, on either replica');
    // What the gateway asked for: its client, the caller's token as an access token, an access
    // token back, for this server (RFC 8707 resource: the server's URL).
    assert.deepEqual(after.exchangeRequests[0], {
      subjectType: 'urn:ietf:params:oauth:token-type:access_token',
      requested: 'urn:ietf:params:oauth:token-type:access_token',
      audience: null,
      scope: null,
      resource: `${fixtureBase}/mcp`,
    });
    // Every MCP request reached the server as the caller it was for.
    const bearers = await (await fetch(`${fixtureBase}/admin/bearers`)).json();
    assert.deepEqual(
      bearers.filter((r) => r.method === 'POST').map((r) => r.user).filter((u, i, all) => all.indexOf(u) === i).sort(),
      ['alice', 'bob'],
    );
    assert.ok(bearers.every((r) => r.user !== null), JSON.stringify(bearers));
  });

  test('concurrent first calls of one token on both replicas exchange it once; a new token is exchanged anew', async () => {
    const before = (await stats()).exchanges;
    const carol = teamToken('carol');
    const texts = await Promise.all(Array.from({ length: 6 }, (_, i) => ranAs(i % 2 ? a.url : b.url, carol)));
    assert.deepEqual(new Set(texts), new Set(['signed-in user carol']));
    assert.equal((await stats()).exchanges, before + 1, 'one exchange for six concurrent calls on two replicas');
    // Alice signs in to her client again: her new token is exchanged (new scopes or groups
    // would come with it), her old one's exchange is not reused for it.
    assert.equal(await ranAs(a.url, teamToken('alice')), 'signed-in user alice');
    assert.equal((await stats()).exchanges, before + 2);
  });

  test("a token the server stops accepting is forgotten and exchanged again; the provider's refusal is a clear, clean error", async () => {
    assert.equal(await ranAs(a.url, bob), 'signed-in user bob');
    const before = (await stats()).exchanges;
    await fetch(`${fixtureBase}/admin/expire`);
    // The server refuses bob's exchanged token: the call says so, and nothing else happens.
    const refused = await whoami(a.url, bob);
    const refusedText = JSON.stringify(refused);
    assert.match(refusedText, /refused the token the identity provider exchanged/, refusedText);
    assert.notEqual(refused.result?.resultType, 'input_required', refusedText);
    assert.doesNotMatch(refusedText, /\/connect\//, 'no sign-in link: nobody needs to sign in');
    // The next call, on either replica, exchanges again and runs.
    assert.equal(await ranAs(b.url, bob), 'signed-in user bob');
    assert.equal((await stats()).exchanges, before + 1);

    const mallory = teamToken('mallory');
    const denied = await whoami(b.url, mallory);
    const text = denied.result?.content?.[0]?.text ?? denied.error?.message ?? '';
    assert.ok(denied.result?.isError || denied.error, JSON.stringify(denied));
    assert.match(text, /invalid_grant/);
    assert.match(text, /refused this caller's token .*sign in to your client again/);
    assert.ok(!text.includes(mallory), 'the provider echoed her token: it is not passed on');
    assert.doesNotMatch(text, /\u001b|\u202e/);
    assert.ok(text.length < 1_000, text);
    assert.doesNotMatch(text, /\/connect\//, 'an exchange server never hands out a sign-in link');
  });

  test("with the store down, calls still run: the token is exchanged without it, and kept in the replica's memory", async () => {
    const before = (await stats()).exchanges;
    await redis.stop();
    const dave = teamToken('dave');
    const started = Date.now();
    assert.equal(await ranAs(a.url, dave), 'signed-in user dave');
    assert.equal(await ranAs(a.url, dave), 'signed-in user dave');
    assert.ok(Date.now() - started < 20_000, 'no long wait on the missing store');
    assert.equal((await stats()).exchanges, before + 1, "the second call uses this replica's own copy while the store is down");
  });

  test('no presented or exchanged token reaches either log', () => {
    for (const replica of [a, b]) {
      const log = replica.stderr();
      assert.match(log, /exchanged the caller's token/);
      for (const secret of [alice, bob, SECRET]) assert.ok(!log.includes(secret), 'a token or secret in a log');
      assert.doesNotMatch(log, /\bat-[A-Za-z0-9_-]{20,}/);
    }
  });
});
