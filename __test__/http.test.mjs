// A streamable-HTTP downstream server: server-everything in its HTTP mode on 127.0.0.1,
// reached through the same five meta-tools.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { call, serverPaths, startGateway, writeConfig } from './helpers.mjs';

/** A free loopback port. */
function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** server-everything over streamable HTTP; resolves once it listens. */
async function startHttpEverything() {
  const port = await freePort();
  const child = spawn(process.execPath, [serverPaths.everything, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise((resolve, reject) => {
    let output = '';
    child.stderr.on('data', (chunk) => {
      output += chunk;
      if (output.includes('listening on port')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`server-everything exited with ${code}: ${output}`)));
  });
  return { child, url: `http://127.0.0.1:${port}/mcp` };
}

test('a streamable-HTTP server works through the five meta-tools', async () => {
  const http = await startHttpEverything();
  const config = writeConfig({
    discovery: {
      servers: [{
        name: 'remote',
        connection: { type: 'http', url: '${REMOTE_URL}', headers: { Authorization: 'Bearer ${REMOTE_TOKEN}', 'X-Client': 'anygpt-test' } },
      }],
    },
  });
  const gateway = await startGateway(config, { REMOTE_URL: http.url, REMOTE_TOKEN: 'test-token' });
  try {
    const { body: servers } = await call(gateway.client, 'list_mcp_servers');
    assert.equal(servers.servers[0].status, 'connected', JSON.stringify(servers));
    assert.ok(servers.servers[0].toolCount > 5);
    const { body: found } = await call(gateway.client, 'search_tools', { query: 'echo' });
    assert.deepEqual([found.results[0].server, found.results[0].tool], ['remote', 'echo']);
    const result = await gateway.client.callTool({
      name: 'execute_tool', arguments: { server: 'remote', tool: 'echo', arguments: { message: 'over http' } },
    });
    assert.equal(result.content[0].text, 'Echo: over http');
  } finally {
    await gateway.client.close();
    http.child.kill();
  }
});

test('an unreachable HTTP server is `error` with the reason', async () => {
  const port = await freePort();
  const config = writeConfig({
    discovery: { servers: [{ name: 'down', startupTimeoutMs: 3000, connection: { type: 'http', url: `http://127.0.0.1:${port}/mcp` } }] },
  });
  const gateway = await startGateway(config);
  try {
    const { body } = await call(gateway.client, 'list_mcp_servers');
    assert.equal(body.servers[0].status, 'error');
    assert.ok(body.servers[0].error.length > 0);
  } finally {
    await gateway.client.close();
  }
});
