// A per-user sign-in link opened in a real browser (Debian's chromium-headless-shell, driven
// over the DevTools protocol: __test__/browser.mjs), against `serve --http` and the OAuth
// fixture with its login page. What only a browser shows: the page's own form is accepted (its
// `Origin` under the page's referrer policy, its SameSite=Strict cookie), the box must be
// ticked, the authorization server's redirect brings the Lax cookie back to the callback, and
// the call then runs as the person. Then two attacks as a browser makes them: another site's
// page posting the form to the gateway, and an authorization address sent on to somebody else.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { launchBrowser } from './browser.mjs';
import { answerOf, bin, eventually, exited, isolatedEnv, listening, raw2026, signedJwt, signingKey, startOAuthServer, tempDir, writeConfig } from './helpers.mjs';

const ISSUER = 'https://id.browser.test';
const AUDIENCE = 'anygpt-browser-test';
const OPENS_LINKS = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } };

describe('a per-user sign-in in a real browser', () => {
  const dir = tempDir('anygpt-browser-');
  const key = signingKey('browser-key-1');
  const token = (subject, claims = {}) => {
    const now = Math.floor(Date.now() / 1000);
    return signedJwt(key, { iss: ISSUER, sub: subject, aud: AUDIENCE, iat: now, exp: now + 600, ...claims });
  };
  const alice = token('alice', { preferred_username: 'alice@team.example' });
  let fixture;
  let gateway;
  let browser;

  /** `whoami` of the per-user server, called by `who`: its JSON-RPC answer. */
  async function whoami(who) {
    const params = { name: 'execute_tool', arguments: { server: 'team-gh', tool: 'whoami' }, _meta: OPENS_LINKS };
    return answerOf(await raw2026(gateway.url, 'tools/call', params, { authorization: `Bearer ${who}` }));
  }

  /** The sign-in link a call by `who` answers with. */
  async function linkFor(who) {
    const answer = await whoami(who);
    const [request] = Object.values(answer.result?.inputRequests ?? {});
    assert.equal(request?.params?.mode, 'url', JSON.stringify(answer));
    return request.params.url;
  }

  before(async () => {
    fixture = await startOAuthServer({ LOGIN_PAGE: '1' });
    const jwks = join(dir, 'jwks.json');
    writeFileSync(jwks, JSON.stringify({ keys: [key.jwk] }));
    const config = writeConfig(
      {
        discovery: {
          servers: [{ name: 'team-gh', connection: { type: 'http', url: fixture.url, oauth: { perUser: true } } }],
          http: { auth: { issuers: [{ issuer: ISSUER, jwksFile: jwks, audience: AUDIENCE }] } },
        },
      },
      dir,
    );
    const child = spawn(process.execPath, [bin, 'serve', '--http', '127.0.0.1:0', '--config', config], {
      env: isolatedEnv(),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    gateway = await listening(child);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    gateway?.child.kill('SIGTERM');
    await gateway?.exit;
    fixture?.child.kill('SIGTERM');
    if (fixture) await exited(fixture.child);
  });

  test('the link names the person, asks for the box and Continue, and the sign-in runs to the end', async () => {
    const link = await linkFor(alice);
    const page = await browser.newPage();
    await page.goto(link);
    assert.match(await page.text(), new RegExp(`Sign in to team-gh for the gateway user alice@team\\.example \\(${ISSUER}#alice\\)\\?`));

    // Continue without the box: the browser does not send the form.
    await page.evaluate("document.querySelector('button').click()");
    assert.equal(await page.url(), link, 'still on the page');
    assert.equal(await page.evaluate("document.querySelector('input[name=me]').validity.valueMissing"), true);

    // The box ticked and Continue: the fixture's login page, where she signs in.
    await page.act("document.querySelector('input[name=me]').click(); document.querySelector('button').click()");
    assert.equal(new URL(await page.url()).origin, fixture.base, await page.text());
    await page.act("document.querySelector('input[name=user]').value = 'alice'; document.querySelector('form').submit()");
    assert.match(await page.text(), /Signed in to team-gh\. Go back to your client/);
    assert.equal((await whoami(alice)).result?.content?.[0]?.text, 'signed-in user alice');
  });

  test("another site's page that posts the form to the gateway signs nobody in, and the link still works", async () => {
    const mallory = token('mallory');
    const link = await linkFor(mallory);
    const state = new URL(link).searchParams.get('state');
    // A page elsewhere (a data: URL, another origin) that submits the form on load, with a
    // value it had to guess: the browser sends its own Origin and none of the gateway's
    // SameSite=Strict cookies.
    const attack = `<form method=post action="${link}"><input name=state value="${state}"><input name=confirm value="${'0'.repeat(64)}"><input name=me value=yes></form><script>document.forms[0].submit()</script>`;
    const page = await browser.newPage();
    // The visitor had opened this link before: their browser holds its cookie.
    await page.goto(link);
    // The data: page loads, then its form's answer: whichever load the navigation waits for,
    // the gateway's answer is read once it is there.
    await page.goto(`data:text/html,${encodeURIComponent(attack)}`).catch(() => {}); // read below
    const refused = /not continued from the page the gateway showed in this browser/;
    const answered = await eventually(async () => refused.test(await page.text().catch(() => '')), 10_000, 50);
    assert.ok(answered, await page.text());
    assert.ok((await page.url()).startsWith(gateway.base), await page.url());
    // Nothing was spent: the link, opened and continued by its person, still signs in.
    await page.goto(link);
    await page.act("document.querySelector('input[name=me]').click(); document.querySelector('button').click()");
    assert.equal(new URL(await page.url()).origin, fixture.base, await page.text());
  });

  test('an authorization address sent on to somebody else ends on a refusal in their browser', async () => {
    const hank = token('hank');
    // Hank continues his link in his own browser (this tab) and, instead of signing in, copies
    // the authorization server's address and sends it to Judy.
    const own = await browser.newPage();
    await own.goto(await linkFor(hank));
    await own.act("document.querySelector('input[name=me]').click(); document.querySelector('button').click()");
    const address = await own.url();
    assert.equal(new URL(address).origin, fixture.base);
    // Judy's browser is another one: no cookie of the gateway's.
    const judy = await launchBrowser();
    try {
      const page = await judy.newPage();
      await page.goto(address);
      await page.act("document.querySelector('input[name=user]').value = 'judy'; document.querySelector('form').submit()");
      assert.match(await page.text(), /started in another browser/);
    } finally {
      await judy.close();
    }
    assert.ok((await whoami(hank)).result?.inputRequests, 'hank still has no token');
  });
});
