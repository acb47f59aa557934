// Fair shares over `serve --http` (`discovery.http.maxInFlightPerCaller`): one authenticated
// user's requests in flight are capped — an answer streaming counts until it ends — and past the
// cap get 429 with Retry-After, while another user is served as before.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { root, serveHttp, signedJwt, signingKey, tempDir } from './helpers.mjs';

const ISSUER = 'https://id.fair.test';
const faultServer = join(root, '__test__/fixtures/fault-server.mjs');

test("one user's calls in flight are capped; another user is still served", async () => {
  const key = signingKey('fair-key');
  const jwks = join(tempDir('anygpt-fair-'), 'jwks.json');
  writeFileSync(jwks, JSON.stringify({ keys: [key.jwk] }));
  const gateway = await serveHttp([{ name: 'fault', connection: { command: process.execPath, args: [faultServer] } }], {
    discovery: { http: { maxInFlightPerCaller: 2, auth: { issuers: [{ issuer: ISSUER, jwksFile: jwks }] } } },
  });
  const now = Math.floor(Date.now() / 1000);
  const tokenOf = (sub) => signedJwt(key, { iss: ISSUER, aud: gateway.url, iat: now, exp: now + 600, sub });
  const call = (sub, tool, signal) =>
    fetch(gateway.url, {
      method: 'POST',
      signal,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
        authorization: `Bearer ${tokenOf(sub)}`,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_tool', arguments: { server: 'fault', tool } } }),
    });
  const hanging = [new AbortController(), new AbortController()];
  try {
    // Two calls that never end hold alice's whole share (their answers stream).
    for (const controller of hanging) assert.equal((await call('alice', 'hang', controller.signal)).status, 200);
    const third = await call('alice', 'pids');
    assert.equal(third.status, 429);
    assert.equal(third.headers.get('retry-after'), '1');
    assert.match(await third.text(), /this user already has 2 requests in flight \(discovery\.http\.maxInFlightPerCaller\)/);
    const bobs = await call('bob', 'pids');
    assert.equal(bobs.status, 200, 'bob has a share of his own');
    await bobs.text();
    // One of alice's calls goes away: its place is free again.
    hanging[0].abort();
    let again;
    for (let i = 0; i < 50; i++) {
      again = await call('alice', 'pids');
      if (again.status === 200) break;
      await again.text();
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(again.status, 200, 'a call that went away frees its place');
    await again.text();
  } finally {
    for (const controller of hanging) controller.abort();
    gateway.child.kill('SIGTERM');
    await gateway.exit;
  }
});
