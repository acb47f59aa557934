// Attacks on the team face (`serve --http`), each one that once worked, kept as a test:
// a page on another origin (or behind DNS rebinding) ending the user's calls, /metrics read
// through a rebound name, connections that never send their request. (`serve-http.test.mjs`
// holds the face's ordinary behaviour; `team.test.mjs` the auth and per-caller tests.)
import assert from 'node:assert/strict';
import net from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { root, serveHttp } from './helpers.mjs';

const faultServer = join(root, '__test__/fixtures/fault-server.mjs');
const fault = (name) => ({ name, connection: { command: process.execPath, args: [faultServer] } });
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25' };

async function stop(gateway) {
  gateway.child.kill('SIGTERM');
  return gateway.exit;
}

/** One raw HTTP/1.1 exchange on a fresh connection: what came back before the server closed. */
function rawHttp(port, text) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (answer += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
    socket.write(text);
  });
}

/** `tools/call` of `execute_tool` as a raw POST (the answer streams until the call ends). */
function execute(url, id, tool, signal) {
  return fetch(url, {
    method: 'POST',
    signal,
    headers: HEADERS,
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_tool', arguments: { server: 'fault', tool } } }),
  });
}

/** The fault server's recorded events (`hang:cancelled` once a hung call was cancelled). */
async function events(url) {
  const response = await execute(url, 'events', 'events');
  const text = await response.text();
  const data = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean);
  return JSON.parse(JSON.parse(data.at(-1)).result.content[0].text);
}

const cancellation = (requestId) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } });

test('a cancellation the Host/Origin checks refuse cancels nothing (cross-origin page, DNS rebinding)', async () => {
  const gateway = await serveHttp([fault('fault')]);
  const port = new URL(gateway.url).port;
  const hung = new AbortController();
  try {
    assert.deepEqual(await events(gateway.url), [], 'the server is up, nothing recorded');
    const call = await execute(gateway.url, 77, 'hang', hung.signal);
    assert.equal(call.status, 200);
    // A page on another origin: a "simple" POST a browser sends without asking first.
    const crossOrigin = await fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', origin: 'http://evil.example' },
      body: cancellation(77),
    });
    assert.equal(crossOrigin.status, 403);
    // A page whose name was rebound to 127.0.0.1: same origin to the browser, a foreign Host.
    const body = cancellation(77);
    const rebound = await rawHttp(
      port,
      `POST /mcp HTTP/1.1\r\nHost: evil.example:${port}\r\nContent-Type: application/json\r\n` +
        `Accept: application/json, text/event-stream\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    assert.match(rebound, /^HTTP\/1\.1 403/);
    // The gateway's own answer to `events` is a request after both refusals: had either
    // cancelled the hung call, the fault server would have recorded it by then.
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(await events(gateway.url), [], 'the refused cancellations cancelled nothing');
    // The same cancellation from the client itself does cancel it (the test can see one).
    const own = await fetch(gateway.url, { method: 'POST', headers: HEADERS, body: cancellation(77) });
    assert.equal(own.status, 202);
    let seen = [];
    for (let i = 0; i < 50 && !seen.includes('hang:cancelled'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      seen = await events(gateway.url);
    }
    assert.deepEqual(seen, ['hang:cancelled']);
  } finally {
    hung.abort();
    await stop(gateway);
  }
});

test('/metrics without auth answers loopback names only: a page rebound to 127.0.0.1 reads nothing', async () => {
  const gateway = await serveHttp([fault('fault')]);
  const port = new URL(gateway.url).port;
  try {
    const get = (host) => rawHttp(port, `GET /metrics HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    assert.match(await get(`127.0.0.1:${port}`), /^HTTP\/1\.1 200[\s\S]*discovery_server_status\{server="fault"/);
    const rebound = await get(`evil.example:${port}`);
    assert.match(rebound, /^HTTP\/1\.1 403/);
    assert.doesNotMatch(rebound, /fault/);
    assert.match(await get(`localhost:${port}`), /^HTTP\/1\.1 200/);
  } finally {
    await stop(gateway);
  }
});
