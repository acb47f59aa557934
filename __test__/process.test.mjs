// The OS side of downstream servers, through the npm bin and the official client: a noisy
// stderr never kills a server, spawn failures name their real cause, and no process of a
// server's tree outlives the gateway, however the gateway ends.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { alive, call, root, spawnGateway, startGateway, tempDir, waitFor, writeConfig } from './helpers.mjs';

const fixture = join(root, '__test__/fixtures/tree-server.mjs');

function treeServer(name, flags = [], more = {}) {
  return { name, connection: { command: process.execPath, args: [fixture, ...flags], ...more } };
}

async function execute(client, server, tool, args = {}) {
  return client.callTool({ name: 'execute_tool', arguments: { server, tool, arguments: args } });
}

const pidsOf = async (client, server) => JSON.parse((await execute(client, server, 'pids')).content[0].text);

describe('server stderr', () => {
  test('a line that is not UTF-8 and a 20 MiB line: the pipe stays open, the server logs and answers on', async () => {
    const gateway = await startGateway(writeConfig({ discovery: { servers: [treeServer('noisy', ['--noisy-stderr'])] } }));
    try {
      const { server } = await pidsOf(gateway.client, 'noisy');
      // Every call logs to stderr: with its pipe closed, the server would die of EPIPE here.
      for (let i = 0; i < 5; i++) {
        const result = await execute(gateway.client, 'noisy', 'echo', { message: `call ${i}` });
        assert.equal(result.isError, undefined, JSON.stringify(result));
        assert.equal(result.content[0].text, `Echo: call ${i}`);
      }
      assert.equal((await pidsOf(gateway.client, 'noisy')).server, server, 'the server was restarted');
      assert.ok(alive(server));
      const { body } = await call(gateway.client, 'list_mcp_servers');
      assert.equal(body.servers[0].status, 'connected', JSON.stringify(body.servers[0]));
    } finally {
      await gateway.client.close();
    }
  });
});

describe('spawn failures', () => {
  test('a cwd that does not exist is named as such, not as a missing command', async () => {
    const missing = join(tempDir(), 'no-such-folder');
    const gateway = await startGateway(writeConfig({ discovery: { servers: [treeServer('lost', [], { cwd: missing })] } }));
    try {
      const result = await execute(gateway.client, 'lost', 'echo', { message: 'hi' });
      const message = JSON.parse(result.content[0].text).error.message;
      assert.match(message, /working directory `[^`]*no-such-folder` does not exist/);
      assert.doesNotMatch(message, /not found/);
      const { body } = await call(gateway.client, 'list_mcp_servers');
      assert.match(JSON.stringify(body.servers[0]), /no-such-folder` does not exist: create it, or fix `cwd`/);
    } finally {
      await gateway.client.close();
    }
  });

  test('a command that is not installed is named with the fix', async () => {
    const server = { name: 'absent', connection: { command: 'surely-not-installed-anywhere' } };
    const gateway = await startGateway(writeConfig({ discovery: { servers: [server] } }));
    try {
      const result = await execute(gateway.client, 'absent', 'echo');
      assert.match(JSON.parse(result.content[0].text).error.message,
        /command `surely-not-installed-anywhere` not found on PATH: install it, or give its full path/);
    } finally {
      await gateway.client.close();
    }
  });
});

describe('process trees end with the gateway', () => {
  // `polite` exits on stdin EOF, leaving a setsid grandchild that ignores SIGTERM; `stubborn`
  // ignores EOF and holds a child in its group plus such a grandchild.
  const polite = treeServer('polite', ['--setsid-grandchild']);
  const stubborn = treeServer('stubborn', ['--ignore-eof', '--child', '--setsid-grandchild']);
  const stops = {
    SIGTERM: [(child) => child.kill('SIGTERM'), [polite, stubborn]],
    SIGINT: [(child) => child.kill('SIGINT'), [polite, stubborn]],
    'stdin EOF': [(child) => child.stdin.end(), [polite, stubborn]],
    // A killed gateway runs no code; the watchdog ends the trees.
    SIGKILL: [(child) => child.kill('SIGKILL'), [polite, stubborn]],
  };
  for (const [how, [stop, servers]] of Object.entries(stops)) {
    test(`${how}: no process of any server's tree is left`, async () => {
      const gateway = await spawnGateway(['--config', writeConfig({ discovery: { servers } })]);
      const pids = [];
      for (const { name } of servers) pids.push(...Object.values(await pidsOf(gateway.client, name)));
      assert.equal(pids.length, servers.length === 2 ? 5 : 3);
      assert.ok(pids.every(alive), `not all started: ${pids}`);
      stop(gateway.child);
      const code = await gateway.exit;
      if (how !== 'SIGKILL') assert.equal(code, 0, gateway.stderr());
      const gone = await waitFor(() => !pids.some(alive), 3000);
      assert.ok(gone, `still running after ${how}: ${pids.filter(alive)} of ${pids}`);
    });
  }
});
