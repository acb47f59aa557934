// Per-user downstream credentials (`connection.oauth.perUser`), end to end: two `serve --http`
// replicas sharing a real redis-server, one downstream MCP server behind OAuth (the oauth
// fixture with its login page, recording which user's bearer each request carries), two team
// users (alice, bob) with JWTs from a key this test makes. A call by someone not signed in
// answers a URL-mode elicitation to `/connect/<server>` (an `inputRequests` entry for a
// 2026-07-28 client), the browser steps (fetch, answering the fixture's login page) run on the
// OTHER replica, and the retried call on the first runs with that user's own token. Each user's
// calls reach the server with their own token only; a used or made-up link is refused; a
// client that cannot open links gets the link in a tool error; no token reaches a log. Opening a
// link shows a page naming whom it is for; only its Continue button, posted from that browser
// (its cookie), goes on to the authorization server — another site's page cannot. The
// server's tool list, once anyone's connection gave it, is everyone's (search, list, details,
// on every replica and one started later); its prompts, resources, templates and completions
// are each caller's own, through their own connection, and one not signed in is asked to
// sign in (URLElicitationRequiredError) instead of being answered with another's.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { answerOf, bin, eventually, exited, freePort, isolatedEnv, listening, printedMatch, raw2026, root, signedJwt, signingKey, tempDir, writeConfig } from './helpers.mjs';

const ISSUER = 'https://id.per-user.test';
const AUDIENCE = 'anygpt-per-user-test';
const OPENS_LINKS = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } };

function accessToken(key, subject, claims = {}) {
  const now = Math.floor(Date.now() / 1000);
  return signedJwt(key, { iss: ISSUER, sub: subject, aud: AUDIENCE, iat: now, exp: now + 600, ...claims });
}

/** `execute_tool` of the fixture's `whoami` as a 2026-07-28 client of `token`; its JSON-RPC answer. */
async function whoami(url, token, more = {}, server = 'team-gh') {
  const params = { name: 'execute_tool', arguments: { server, tool: 'whoami' }, _meta: OPENS_LINKS, ...more };
  return answerOf(await raw2026(url, 'tools/call', params, { authorization: `Bearer ${token}` }));
}

/** `method` with `params` as a 2026-07-28 client of `token`; its JSON-RPC answer. */
async function rpc(url, token, method, params = {}) {
  return answerOf(await raw2026(url, method, params, { authorization: `Bearer ${token}` }));
}

/** A meta tool's answer as a 2026-07-28 client of `token`: its JSON body, and whether it is an error. */
async function meta(url, token, name, args = {}) {
  const answer = await rpc(url, token, 'tools/call', { name, arguments: args });
  assert.ok(answer.result?.content, JSON.stringify(answer));
  return { isError: answer.result.isError === true, body: JSON.parse(answer.result.content[0].text) };
}

/** What `list_mcp_servers` says of `server` to `token`. */
async function listed(url, token, server = 'team-gh') {
  const { body } = await meta(url, token, 'list_mcp_servers');
  return body.servers.find((s) => s.name === server);
}

/** The one question of an input-required result: its key, the request, the state. */
function question(answer) {
  assert.equal(answer.result?.resultType, 'input_required', JSON.stringify(answer));
  const keys = Object.keys(answer.result.inputRequests);
  assert.equal(keys.length, 1, JSON.stringify(answer.result));
  return { key: keys[0], request: answer.result.inputRequests[keys[0]], state: answer.result.requestState };
}

/**
 * What a person's browser does with a sign-in link on `base` (another replica's origin put in
 * place of the link's): follow it to the fixture's login page, sign in there as `user`, follow
 * the redirect back to the gateway's callback. The last page's status and text.
 */
async function signInWithBrowser(link, base, user) {
  return finishInBrowser(await openLink(link, base), base, user);
}

/**
 * A sign-in link opened on `base` as a browser does: the gateway's page naming whom the link is
 * for, then its Continue button. The authorization address that sends the browser to, and the
 * cookie the browser holds from then on.
 */
async function openLink(link, base) {
  const shown = await confirmationPage(link, base);
  const toAuthorize = await continueSignIn(shown);
  assert.equal(toAuthorize.status, 303, await toAuthorize.text());
  return browserAfter(toAuthorize);
}

/** Where the browser goes after continuing (`authorize`), with the cookie it was given then. */
function browserAfter(continued) {
  const cookie = continued.headers.getSetCookie().find((c) => c.startsWith('anygpt-signin-'));
  assert.ok(cookie, continued.headers.getSetCookie().join('\n'));
  return { authorize: continued.headers.get('location'), cookie: cookie.split(';')[0] };
}

/** The page a sign-in link opened on `base` shows: its text, form fields and cookie. */
async function confirmationPage(link, base, cookie) {
  const start = new URL(link);
  const address = new URL(start.pathname + start.search, base);
  const shown = await fetch(address, { redirect: 'manual', headers: cookie ? { cookie } : {} });
  const text = await shown.text();
  assert.equal(shown.status, 200, text);
  const form = Object.fromEntries([...text.matchAll(/<input type=hidden name=(\w+) value="([^"]*)">/g)].map(([, name, value]) => [name, value]));
  assert.deepEqual(Object.keys(form), ['state', 'confirm'], text);
  return { address, text, form, headers: shown.headers, cookie: shown.headers.get('set-cookie').split(';')[0] };
}

/**
 * The page's box ticked and its Continue pressed: its form posted to the page's own address
 * with the page's cookie, as the browser that was shown it sends them (`headers` changes what
 * it sends). `Origin` as the Fetch standard has a browser send it with a form's POST: `null`
 * under the page's `Referrer-Policy: no-referrer`, else the page's origin.
 */
function continueSignIn({ address, form, cookie, headers: page }, headers = {}) {
  return fetch(address, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      cookie,
      origin: page.get('referrer-policy') === 'no-referrer' ? 'null' : address.origin,
      'sec-fetch-site': 'same-origin',
      ...headers,
    },
    body: new URLSearchParams({ me: 'yes', ...form }),
  });
}

/**
 * The rest of {@link signInWithBrowser}, from the authorization address `authorize`, in the
 * browser holding `cookie` (the gateway's, sent back to it only).
 */
async function finishInBrowser({ authorize, cookie }, base, user) {
  const login = await fetch(authorize);
  const form = await login.text();
  assert.match(form, /<form method="get" action="\/authorize\/approve">/);
  const approve = new URL('/authorize/approve', authorize);
  for (const [, name, value] of form.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) {
    approve.searchParams.set(name, value.replace(/&#(\d+);/g, (_, c) => String.fromCharCode(Number(c))));
  }
  approve.searchParams.set('user', user);
  const back = await fetch(approve, { redirect: 'manual' });
  assert.equal(back.status, 302);
  const callback = new URL(back.headers.get('location'));
  assert.equal(callback.origin, new URL(base).origin, 'the authorization server sends the browser back to the replica it came through');
  const done = await fetch(callback, { headers: { cookie } });
  return { status: done.status, text: await done.text() };
}

describe('per-user credentials: each caller signs in to the downstream server with their own account', () => {
  const dir = tempDir('anygpt-per-user-');
  const key = signingKey('per-user-key-1');
  const alice = accessToken(key, 'alice');
  const bob = accessToken(key, 'bob');
  let redis;
  let fixture;
  let fixtureBase;
  let shortLived; // the same fixture with access tokens that last 3 s
  let shortBase;
  let a;
  let b;
  let config;

  async function replica(config) {
    const child = spawn(process.execPath, [bin, 'serve', '--http', '127.0.0.1:0', '--config', config], {
      env: isolatedEnv(),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    return listening(child);
  }

  before(async () => {
    const redisPort = await freePort();
    redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    await printedMatch(redis, 'stdout', /Ready to accept connections/);
    fixture = spawn(process.execPath, [join(root, '__test__/fixtures/oauth-server.mjs')], {
      env: { ...process.env, LOGIN_PAGE: '1' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [, port] = await printedMatch(fixture, 'stdout', /listening (\d+)/);
    fixtureBase = `http://127.0.0.1:${port}`;
    shortLived = spawn(process.execPath, [join(root, '__test__/fixtures/oauth-server.mjs')], {
      env: { ...process.env, LOGIN_PAGE: '1', ACCESS_LIFETIME_S: '3' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [, shortPort] = await printedMatch(shortLived, 'stdout', /listening (\d+)/);
    shortBase = `http://127.0.0.1:${shortPort}`;
    const jwks = join(dir, 'jwks.json');
    writeFileSync(jwks, JSON.stringify({ keys: [key.jwk] }));
    config = writeConfig(
      {
        discovery: {
          servers: [
            { name: 'team-gh', connection: { type: 'http', url: `${fixtureBase}/mcp`, oauth: { perUser: true } } },
            { name: 'short', connection: { type: 'http', url: `${shortBase}/mcp`, oauth: { perUser: true } } },
          ],
          // Sessions for older clients: how a legacy client is asked (`elicitation/create`).
          http: { legacySessions: true, auth: { issuers: [{ issuer: ISSUER, jwksFile: jwks, audience: AUDIENCE }] } },
          store: { url: `redis://127.0.0.1:${redisPort}`, key: randomBytes(32).toString('base64') },
        },
      },
      dir,
    );
    [a, b] = await Promise.all([replica(config), replica(config)]);
  });

  after(async () => {
    for (const child of [a?.child, b?.child]) child?.kill('SIGTERM');
    await Promise.all([a?.exit, b?.exit]);
    fixture?.kill('SIGTERM');
    shortLived?.kill('SIGTERM');
    redis?.kill('SIGTERM');
    if (fixture) await exited(fixture);
    if (shortLived) await exited(shortLived);
    if (redis) await exited(redis);
  });

  test('before anyone signed in: the server says it needs each caller\'s sign-in, its tools answer with the link, its prompts too', async () => {
    const server = await listed(a.url, alice);
    assert.equal(server.perUser, true, JSON.stringify(server));
    assert.equal(server.signedIn, false, JSON.stringify(server));
    assert.equal(server.status, 'needs sign-in', JSON.stringify(server));
    assert.match(server.error, /each caller signs in with their own account/);
    assert.equal(server.toolCount, 0);
    // Nothing to search yet: no one's connection has listed its tools.
    const found = await meta(a.url, alice, 'search_tools', { query: 'who is signed in' });
    assert.deepEqual(found.body.results.filter((r) => r.server === 'team-gh'), []);
    // Listing its tools is what needs her sign-in: she gets her link, as a call would give it.
    const link = new RegExp(`needs your own sign-in: open ${a.base}/connect/team-gh\\?state=[0-9a-f]{64} in your browser`);
    for (const [name, args] of [['list_tools', { server: 'team-gh' }], ['get_tool_details', { server: 'team-gh', tool: 'whoami' }]]) {
      const answer = await meta(a.url, alice, name, args);
      assert.equal(answer.isError, true, JSON.stringify(answer));
      assert.equal(answer.body.error.code, 'SERVER_CONNECTION_ERROR');
      assert.match(answer.body.error.message, link, JSON.stringify(answer));
    }
    // Its prompts are hers to list once she signed in: none yet, and the listing still answers.
    const prompts = await rpc(a.url, alice, 'prompts/list');
    assert.deepEqual(prompts.result?.prompts?.filter((p) => p.name.startsWith('team-gh__')), [], JSON.stringify(prompts));
    // Using one asks her to sign in: a URL elicitation in MCP's URLElicitationRequiredError.
    const got = await rpc(a.url, alice, 'prompts/get', { name: 'team-gh__greet', arguments: { style: 'formal' } });
    assert.equal(got.error?.code, -32042, JSON.stringify(got));
    const [elicitation] = got.error.data.elicitations;
    assert.equal(elicitation.mode, 'url');
    assert.match(elicitation.url, new RegExp(`^${a.base}/connect/team-gh\\?state=[0-9a-f]{64}$`));
    assert.match(got.error.message, /needs your own sign-in: open http/);
  });

  test('the first to sign in with the link list_tools gave lists the tools through their own connection', async () => {
    const erin = accessToken(key, 'erin');
    const asked = await meta(b.url, erin, 'list_tools', { server: 'team-gh' });
    const [link] = asked.body.error.message.match(/http:\/\/\S+\/connect\/team-gh\?state=[0-9a-f]{64}/);
    assert.equal((await signInWithBrowser(link, a.base, 'erin')).status, 200);
    const tools = await meta(b.url, erin, 'list_tools', { server: 'team-gh' });
    assert.equal(tools.isError, false, JSON.stringify(tools.body));
    assert.deepEqual(tools.body.tools.map((t) => t.name).sort(), ['admin_report', 'links', 'whoami']);
    assert.equal((await listed(b.url, erin)).signedIn, true);
    // Her connection's list is kept for everyone, on the other replica too (through the store).
    assert.ok(await eventually(async () => (await listed(a.url, alice)).toolCount === 3, 5_000), 'the list reaches the other replica');
  });

  test("alice's call asks her to sign in; she signs in through the other replica; the retried call runs with her token", async () => {
    const first = await whoami(a.url, alice);
    const { key: asked, request, state } = question(first);
    assert.equal(request.method, 'elicitation/create');
    assert.equal(request.params.mode, 'url');
    const link = request.params.url;
    assert.match(link, new RegExp(`^${a.base}/connect/team-gh\\?state=[0-9a-f]{64}$`), link);

    const page = await signInWithBrowser(link, b.base, 'alice');
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /Signed in to team-gh\. Go back to your client/);

    const done = await whoami(a.url, alice, { inputResponses: { [asked]: { action: 'accept' } }, requestState: state });
    assert.equal(done.result?.resultType ?? 'complete', 'complete', JSON.stringify(done));
    assert.equal(done.result.isError, undefined, JSON.stringify(done));
    assert.equal(done.result.content[0].text, 'signed-in user alice');
    // Her next calls, on either replica, run at once.
    for (const replica of [a, b]) {
      const again = await whoami(replica.url, alice);
      assert.equal(again.result?.content?.[0]?.text, 'signed-in user alice', JSON.stringify(again));
    }

    // The link was spent: it opens nothing again, on either replica.
    for (const base of [a.base, b.base]) {
      const replayed = await fetch(new URL(new URL(link).pathname + new URL(link).search, base), { redirect: 'manual' });
      assert.equal(replayed.status, 400);
      assert.match(await replayed.text(), /used already, has expired/);
    }
  });

  test("the tools anyone's connection listed are everyone's, on every replica; alice's prompts and resources are hers only", async () => {
    // Bob has not signed in: he still finds and reads the tools alice's connection listed, on
    // the other replica (through the store).
    const found = await meta(b.url, bob, 'search_tools', { query: 'who is signed in' });
    assert.ok(found.body.results.some((r) => r.server === 'team-gh' && r.tool === 'whoami'), JSON.stringify(found.body));
    const tools = await meta(b.url, bob, 'list_tools', { server: 'team-gh' });
    assert.deepEqual(tools.body.tools.map((t) => t.name).sort(), ['admin_report', 'links', 'whoami'], JSON.stringify(tools.body));
    const details = await meta(b.url, bob, 'get_tool_details', { server: 'team-gh', tool: 'whoami' });
    assert.equal(details.body.description, 'Say who is signed in', JSON.stringify(details.body));
    const forBob = await listed(b.url, bob);
    assert.deepEqual([forBob.perUser, forBob.signedIn, forBob.status, forBob.toolCount], [true, false, 'needs sign-in', 3], JSON.stringify(forBob));
    const forAlice = await listed(b.url, alice);
    // Hers is the state of her own connection there (her call on b opened it).
    assert.deepEqual([forAlice.perUser, forAlice.signedIn, forAlice.toolCount, forAlice.status], [true, true, 3, 'connected'], JSON.stringify(forAlice));

    // A replica started now, with a cache of its own, has the list from the store at once.
    const c = await replica(config);
    try {
      const fresh = await meta(c.url, bob, 'search_tools', { query: 'who is signed in' });
      assert.ok(fresh.body.results.some((r) => r.server === 'team-gh' && r.tool === 'whoami'), JSON.stringify(fresh.body));
      assert.equal((await listed(c.url, bob)).toolCount, 3);
    } finally {
      c.child.kill('SIGTERM');
      await c.exit;
    }

    // Alice's prompts, resources, templates and completions, through her own connection, on
    // either replica.
    for (const replica of [a, b]) {
      const prompts = await rpc(replica.url, alice, 'prompts/list');
      const greet = prompts.result?.prompts?.find((p) => p.name === 'team-gh__greet');
      assert.equal(greet?.description, 'Greet alice', JSON.stringify(prompts));
      const got = await rpc(replica.url, alice, 'prompts/get', { name: 'team-gh__greet', arguments: { style: 'formal' } });
      assert.equal(got.result?.messages?.[0]?.content?.text, 'hello alice (formal)', JSON.stringify(got));
    }
    const resources = await rpc(a.url, alice, 'resources/list');
    assert.ok(resources.result?.resources?.some((r) => r.uri === 'notes://alice/today'), JSON.stringify(resources));
    const read = await rpc(a.url, alice, 'resources/read', { uri: 'notes://alice/today' });
    assert.equal(read.result?.contents?.[0]?.text, "today's notes of alice", JSON.stringify(read));
    const templates = await rpc(a.url, alice, 'resources/templates/list');
    assert.ok(templates.result?.resourceTemplates?.some((t) => t.uriTemplate === 'notes://alice/{day}'), JSON.stringify(templates));
    const byDay = await rpc(b.url, alice, 'resources/read', { uri: 'notes://alice/monday' });
    assert.equal(byDay.result?.contents?.[0]?.text, "monday's notes of alice", JSON.stringify(byDay));
    const completed = await rpc(a.url, alice, 'completion/complete', {
      ref: { type: 'ref/prompt', name: 'team-gh__greet' },
      argument: { name: 'style', value: 'fr' },
    });
    assert.deepEqual(completed.result?.completion?.values, ['friendly'], JSON.stringify(completed));

    // Bob sees none of hers: nothing of the server in his lists, and using hers asks him to
    // sign in himself.
    const bobs = await rpc(b.url, bob, 'prompts/list');
    assert.deepEqual(bobs.result?.prompts?.filter((p) => p.name.startsWith('team-gh__')), [], JSON.stringify(bobs));
    const bobsResources = await rpc(a.url, bob, 'resources/list');
    assert.deepEqual(bobsResources.result?.resources?.filter((r) => r.uri.startsWith('notes://')), [], JSON.stringify(bobsResources));
    for (const [method, params] of [
      ['prompts/get', { name: 'team-gh__greet', arguments: { style: 'formal' } }],
      ['resources/read', { uri: 'notes://alice/today' }],
    ]) {
      const refused = await rpc(a.url, bob, method, params);
      assert.equal(refused.error?.code, -32042, JSON.stringify(refused));
      assert.match(refused.error.data.elicitations[0].url, new RegExp(`^${a.base}/connect/team-gh\\?state=[0-9a-f]{64}$`));
      assert.doesNotMatch(JSON.stringify(refused), /alice/);
    }
  });

  test("bob never gets alice's connection or token: he is asked to sign in himself, and his calls carry his own token", async () => {
    const first = await whoami(b.url, bob);
    const { key: asked, request, state } = question(first);
    const link = request.params.url;
    assert.match(link, new RegExp(`^${b.base}/connect/team-gh\\?state=[0-9a-f]{64}$`));
    const page = await signInWithBrowser(link, a.base, 'bob');
    assert.equal(page.status, 200, page.text);
    // Alice cannot answer bob's question: his round's state is bound to him.
    const stolen = await whoami(b.url, alice, { inputResponses: { [asked]: { action: 'accept' } }, requestState: state });
    assert.equal(stolen.error?.code, -32602, JSON.stringify(stolen));
    const done = await whoami(b.url, bob, { inputResponses: { [asked]: { action: 'accept' } }, requestState: state });
    assert.equal(done.result.content[0].text, 'signed-in user bob', JSON.stringify(done));
    // Both, interleaved on both replicas: each with their own.
    const answers = await Promise.all([whoami(a.url, alice), whoami(a.url, bob), whoami(b.url, alice), whoami(b.url, bob)]);
    assert.deepEqual(
      answers.map((answer) => answer.result?.content?.[0]?.text),
      ['signed-in user alice', 'signed-in user bob', 'signed-in user alice', 'signed-in user bob'],
    );
    // Every MCP message the server got carried the token of a user who signed in, never none
    // (the GETs without one are the sign-in's discovery, reading the server's 401 challenge).
    const bearers = await (await fetch(`${fixtureBase}/admin/bearers`)).json();
    const messages = bearers.filter((r) => r.method === 'POST');
    assert.ok(messages.length >= 8, JSON.stringify(bearers));
    assert.deepEqual([...new Set(messages.map((r) => r.user))].sort(), ['alice', 'bob', 'erin'], JSON.stringify(bearers));
    // His prompts and resources now, his own.
    const got = await rpc(a.url, bob, 'prompts/get', { name: 'team-gh__greet', arguments: { style: 'friendly' } });
    assert.equal(got.result?.messages?.[0]?.content?.text, 'hello bob (friendly)', JSON.stringify(got));
    const resources = await rpc(b.url, bob, 'resources/list');
    const notes = resources.result?.resources?.filter((r) => r.uri.startsWith('notes://')).map((r) => r.uri);
    assert.deepEqual(notes, ['notes://bob/today'], JSON.stringify(resources));
    assert.equal((await listed(a.url, bob)).signedIn, true);
  });

  test('a made-up, misplaced or malformed link is refused, and nobody signs in with it', async () => {
    const made = await fetch(`${a.base}/connect/team-gh?state=${'0'.repeat(64)}`, { redirect: 'manual' });
    assert.equal(made.status, 400);
    assert.match(await made.text(), /used already, has expired \(links last 10 minutes\), or is not one the gateway gave/);
    const other = await fetch(`${a.base}/connect/nope?state=${'0'.repeat(64)}`, { redirect: 'manual' });
    assert.equal(other.status, 404);
    const twice = await fetch(`${a.base}/connect/team-gh?state=a&state=b`, { redirect: 'manual' });
    assert.equal(twice.status, 400);
    assert.match(await twice.text(), /`state` is given twice/);
    const huge = await fetch(`${a.base}/connect/team-gh?state=${'a'.repeat(5000)}`, { redirect: 'manual' });
    assert.equal(huge.status, 400);
    const html = await fetch(`${a.base}/connect/%3Cscript%3E?state=x`, { redirect: 'manual' });
    assert.equal(html.status, 404);
    const text = await html.text();
    assert.ok(!text.includes('<script>') && text.includes('&lt;script&gt;'), text);
    const noFlow = await fetch(`${b.base}/connect/callback?code=c&state=${'1'.repeat(40)}`);
    assert.equal(noFlow.status, 400);
  });

  test('an opened link names whom it is for and signs nobody in until continued from that page in that browser', async () => {
    const ivy = accessToken(key, 'ivy', { preferred_username: 'ivy@team.example' });
    const { request } = question(await whoami(a.url, ivy));
    const shown = await confirmationPage(request.params.url, b.base);
    // A page, not a redirect: a site that loads the link (an image, a frame, a redirect) does
    // not reach the authorization server, where the browser may be signed in already. It
    // names her as a person reads her name, with who she is to the gateway.
    assert.equal(shown.headers.get('location'), null);
    assert.match(shown.text, new RegExp(`Sign in to <b>team-gh</b> for the gateway user <b>ivy@team\\.example \\(${ISSUER}#ivy\\)</b>\\?`));
    assert.match(shown.text, /Continue only if you are /);
    assert.match(shown.text, /<input type=checkbox name=me value=yes required> I am ivy@team\.example/);
    // Its own form carries its origin (a `no-referrer` page's would say `Origin: null`).
    assert.equal(shown.headers.get('referrer-policy'), 'same-origin');
    // Opened again in the same browser (her client opened it, and she did too): the same
    // value, so the first tab's Continue still counts.
    const again = await confirmationPage(request.params.url, a.base, shown.cookie);
    assert.equal(again.form.confirm, shown.form.confirm);
    assert.match(shown.headers.get('content-security-policy'), /frame-ancestors 'none'/);
    assert.equal(shown.headers.get('x-frame-options'), 'DENY');
    assert.match(shown.headers.get('set-cookie'), /^anygpt-connect-[0-9a-f]{16}=[0-9a-f]{64}; Max-Age=600; Path=\/connect; HttpOnly; SameSite=Strict$/);

    // What another site's page can send: its own Origin, no cookie of ours (SameSite), a value
    // it cannot know. Each is refused, on either replica, and leaves the link usable.
    const refusals = [
      { origin: 'https://evil.example' },
      { 'sec-fetch-site': 'cross-site' },
      { cookie: '' },
      { cookie: shown.cookie.replace(/=.*/, `=${'0'.repeat(64)}`) },
    ];
    for (const [i, headers] of refusals.entries()) {
      const refused = await continueSignIn(i % 2 ? { ...shown, address: new URL(shown.address.pathname + shown.address.search, a.base) } : shown, headers);
      assert.equal(refused.status, 403, JSON.stringify(headers));
      assert.match(await refused.text(), /not continued from the page the gateway showed in this browser/);
    }
    const forged = await continueSignIn({ ...shown, form: { ...shown.form, confirm: '1'.repeat(64) } });
    assert.equal(forged.status, 403);
    // The box not ticked: nothing happens but a page saying to tick it.
    const unticked = await continueSignIn({ ...shown, form: { ...shown.form, me: '' } });
    assert.equal(unticked.status, 400);
    assert.match(await unticked.text(), /Tick &quot;I am …&quot; to continue/);
    // Another link's page does not continue this one.
    const other = await confirmationPage(question(await whoami(a.url, accessToken(key, 'hank'))).request.params.url, a.base);
    assert.equal((await continueSignIn({ ...shown, cookie: other.cookie, form: { ...shown.form, confirm: other.form.confirm } })).status, 403);

    // Continued from the page: the page's cookie is cleared, the sign-in's given, and the
    // sign-in runs.
    const continued = await continueSignIn(shown);
    assert.equal(continued.status, 303, await continued.text());
    const [cleared, started] = continued.headers.getSetCookie();
    assert.equal(cleared, `${shown.cookie.replace(/=.*/, '=')}; Max-Age=0; Path=/connect; HttpOnly; SameSite=Strict`);
    assert.match(started, /^anygpt-signin-[0-9a-f]{16}=[0-9a-f]{64}; Max-Age=600; Path=\/connect; HttpOnly; SameSite=Lax$/);
    const page = await finishInBrowser(browserAfter(continued), b.base, 'ivy');
    assert.equal(page.status, 200, page.text);
    assert.equal((await whoami(a.url, ivy)).result?.content?.[0]?.text, 'signed-in user ivy');
  });

  test('an authorization address sent on to somebody else signs nobody in for the link\'s caller', async () => {
    // Hank continues his own link, then sends the authorization address it gave him to Judy,
    // whose browser is signed in at the authorization server: she signs in there, and her
    // browser comes back to the gateway without the cookie Hank's browser holds.
    const hank = accessToken(key, 'hank');
    const hanks = await openLink(question(await whoami(a.url, hank)).request.params.url, a.base);
    // Judy's browser holds no cookie of the gateway's, or one of that name with another value.
    const named = hanks.cookie.replace(/=.*/, `=${'2'.repeat(64)}`);
    for (const cookie of ['', named]) {
      const page = await finishInBrowser({ authorize: hanks.authorize, cookie }, a.base, 'judy');
      assert.equal(page.status, 403, page.text);
      assert.match(page.text, /started in another browser/);
    }
    // Nor can her browser end his sign-in with an error.
    const refusal = new URL('/connect/callback', b.base);
    refusal.searchParams.set('state', new URL(hanks.authorize).searchParams.get('state'));
    refusal.searchParams.set('error', 'access_denied');
    assert.equal((await fetch(refusal)).status, 403);
    // Hank holds no token: his call still asks him to sign in; nothing reached the server as Judy.
    question(await whoami(b.url, hank));
    // The refused callbacks spent nothing: in his own browser, his sign-in still finishes.
    const page = await finishInBrowser(hanks, a.base, 'hank');
    assert.equal(page.status, 200, page.text);
    assert.equal((await whoami(a.url, hank)).result?.content?.[0]?.text, 'signed-in user hank');
  });

  test("an authorization server's refusal shows its error code only: a description anyone holding a state can write never reaches the gateway's page", async () => {
    const frank = accessToken(key, 'frank');
    const { request } = question(await whoami(a.url, frank));
    const browser = await openLink(request.params.url, b.base);
    const callback = new URL('/connect/callback', a.base);
    callback.searchParams.set('state', new URL(browser.authorize).searchParams.get('state'));
    callback.searchParams.set('error', 'access_denied');
    callback.searchParams.set('error_description', 'Your session expired: sign in again at https://evil.example/login');
    const refused = await fetch(callback, { headers: { cookie: browser.cookie } });
    const text = await refused.text();
    assert.match(text, /Signing in to team-gh was refused \(access_denied\)/);
    assert.doesNotMatch(text, /evil\.example|session expired/);
  });

  test('an older client on a session is asked with elicitation/create in URL mode, and its call runs once it accepted', async () => {
    const dave = accessToken(key, 'dave');
    const client = new Client({ name: 'per-user-legacy', version: '0.0.0' }, { capabilities: { elicitation: { url: {} } } });
    const asked = [];
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params);
      // The person opens the link (here on the other replica) and signs in, then the client accepts.
      const page = await signInWithBrowser(request.params.url, b.base, 'dave');
      assert.equal(page.status, 200, page.text);
      return { action: 'accept' };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(a.url), { requestInit: { headers: { authorization: `Bearer ${dave}` } } }));
    try {
      const result = await client.callTool({ name: 'execute_tool', arguments: { server: 'team-gh', tool: 'whoami' } });
      assert.equal(result.content[0].text, 'signed-in user dave', JSON.stringify(result));
      assert.equal(asked.length, 1);
      assert.equal(asked[0].mode, 'url');
      assert.match(asked[0].url, new RegExp(`^${a.base}/connect/team-gh\\?state=[0-9a-f]{64}$`));
      assert.match(asked[0].message, /Sign in to team-gh with your own account/);
    } finally {
      await client.close();
    }
  });

  test('a client that cannot open links gets the link in a tool error, and the call did not run', async () => {
    const carol = accessToken(key, 'carol');
    const answer = await whoami(a.url, carol, { _meta: { 'io.modelcontextprotocol/clientCapabilities': {} } });
    assert.equal(answer.result?.isError, true, JSON.stringify(answer));
    const body = JSON.parse(answer.result.content[0].text);
    assert.equal(body.error.code, 'SERVER_CONNECTION_ERROR');
    assert.match(body.error.message, new RegExp(`needs your own sign-in: open ${a.base}/connect/team-gh\\?state=[0-9a-f]{64} in your browser, sign in, then call the tool again`));
  });

  test('an expired token is refreshed once, under the store lock, when calls on both replicas need it at once', async () => {
    const first = await whoami(a.url, alice, {}, 'short');
    const { key: asked, request, state } = question(first);
    assert.equal((await signInWithBrowser(request.params.url, b.base, 'alice')).status, 200);
    const done = await whoami(a.url, alice, { inputResponses: { [asked]: { action: 'accept' } }, requestState: state }, 'short');
    assert.equal(done.result?.content?.[0]?.text, 'signed-in user alice', JSON.stringify(done));
    // Past the 3 s expiry: both replicas refresh together. The fixture rotates refresh tokens
    // (a used one is refused), so without the lock one of them would spend a token the other
    // already used and ask alice to sign in again.
    await new Promise((resolve) => setTimeout(resolve, 3_300));
    const calls = [a, b, a, b, a, b].map((replica) => whoami(replica.url, alice, {}, 'short'));
    const answers = await Promise.all(calls);
    assert.deepEqual(
      answers.map((answer) => answer.result?.content?.[0]?.text),
      Array(6).fill('signed-in user alice'),
      JSON.stringify(answers),
    );
    const stats = await (await fetch(`${shortBase}/admin/stats`)).json();
    assert.equal(stats.codeGrants, 1, 'one sign-in');
    assert.equal(stats.refreshGrants, 1, `six calls on two replicas refresh once: ${JSON.stringify(stats)}`);
    assert.equal(stats.refused, 0, 'no refresh token was spent twice');
  });

  test('a refresh token the authorization server refused is dropped: the next calls ask to sign in without sending it again', async () => {
    // Alice holds a 3 s token for `short` (the test above): past its expiry, with its refresh
    // token revoked, the first call's refresh is refused.
    await new Promise((resolve) => setTimeout(resolve, 3_300));
    await fetch(`${shortBase}/admin/revoke`);
    const refusedBefore = (await (await fetch(`${shortBase}/admin/stats`)).json()).refused;
    for (const replica of [a, b, a]) question(await whoami(replica.url, alice, {}, 'short'));
    const stats = await (await fetch(`${shortBase}/admin/stats`)).json();
    assert.equal(stats.refused - refusedBefore, 1, `the dead refresh token was sent once, not at every call: ${JSON.stringify(stats)}`);
  });

  test('a sign-in that finishes while a refresh of the previous token is under way is the one kept', async () => {
    const gina = accessToken(key, 'gina');
    // Two links: the first opened (its state spent, so the next call gets a new one) and
    // finished as `gina`; the second opened now and finished later as `gina-work`.
    const first = question(await whoami(a.url, gina, {}, 'short')).request.params.url;
    const firstAuthorize = await openLink(first, b.base);
    const second = question(await whoami(a.url, gina, {}, 'short')).request.params.url;
    assert.notEqual(second, first);
    assert.equal((await finishInBrowser(firstAuthorize, b.base, 'gina')).status, 200);
    assert.equal((await whoami(a.url, gina, {}, 'short')).result?.content?.[0]?.text, 'signed-in user gina');
    const secondAuthorize = await openLink(second, b.base);
    // Past the 3 s expiry, a call refreshes gina's token; the authorization server takes 1.5 s
    // to answer, and meanwhile she finishes signing in with her other account.
    await new Promise((resolve) => setTimeout(resolve, 3_300));
    await fetch(`${shortBase}/admin/slow-refresh?ms=1500`);
    const refreshing = whoami(a.url, gina, {}, 'short');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal((await finishInBrowser(secondAuthorize, b.base, 'gina-work')).status, 200);
    await refreshing;
    const now = await whoami(b.url, gina, {}, 'short');
    assert.equal(now.result?.content?.[0]?.text, 'signed-in user gina-work', JSON.stringify(now));
  });

  test('a token the server revoked before its expiry is dropped: the next call asks to sign in again, then runs', async () => {
    assert.equal((await whoami(a.url, alice)).result?.content?.[0]?.text, 'signed-in user alice');
    await fetch(`${fixtureBase}/admin/revoke`);
    const refused = await whoami(a.url, alice);
    const { key: asked, request, state } = question(refused);
    assert.match(request.params.url, new RegExp(`^${a.base}/connect/team-gh\\?state=[0-9a-f]{64}$`));
    // Dropped from the store: the other replica asks too, instead of sending the dead token.
    const elsewhere = await whoami(b.url, alice);
    assert.equal(elsewhere.result?.resultType, 'input_required', JSON.stringify(elsewhere));
    assert.equal((await signInWithBrowser(request.params.url, b.base, 'alice')).status, 200);
    const done = await whoami(a.url, alice, { inputResponses: { [asked]: { action: 'accept' } }, requestState: state });
    assert.equal(done.result?.content?.[0]?.text, 'signed-in user alice', JSON.stringify(done));
  });

  test('no downstream token reaches a log', () => {
    for (const replica of [a, b]) assert.doesNotMatch(replica.stderr(), /\b(at|rt)-[A-Za-z0-9_-]{20,}/);
  });
});
