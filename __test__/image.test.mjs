// The container image's binary, run as the image runs it: chrooted into a root that holds only
// the image's files, as its non-root user, with only the image's environment. No container
// runs here, so this is the image without the runtime: what the runtime adds (/etc/hosts) the
// test writes itself.
//
// The root is the built image's own filesystem when ANYGPT_IMAGE names one (`npm run image`
// sets it: `podman create` + `podman export`), else the context `npm run image` would build
// from, staged from the debug binary `npm test` built (same libraries, same files).
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { IMAGE_UID, stage } from '../scripts/image.mjs';
import { hostTriple } from '../scripts/host.mjs';
import { listening, root, signedJwt, signingKey, startHttpEverything, tempDir } from './helpers.mjs';

const image = process.env.ANYGPT_IMAGE;
const engine = process.env.ANYGPT_IMAGE_ENGINE ?? 'podman';
const BINARY = '/usr/local/bin/anygpt-discovery';
const containerfile = readFileSync(join(root, 'Containerfile'), 'utf8');
// Found on this PATH: the image's environment, passed whole, has none.
const CHROOT = execFileSync('sh', ['-c', 'command -v chroot'], { encoding: 'utf8' }).trim();

/** The `ENV` of Containerfile, as the image's processes get it (and nothing else). */
function imageEnv() {
  const block = /^ENV ((?:.*\\\n)*.*)$/m.exec(containerfile)[1].replace(/\\\n/g, ' ');
  return Object.fromEntries([...block.matchAll(/(\w+)=(\S+)/g)].map(([, name, value]) => [name, value]));
}

// Each root holds a copy of the binary (a debug one is hundreds of MB): removed at the end.
const made = [];
after(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A folder holding the image's files: exported from the built image, or staged. */
function imageRoot() {
  const dir = tempDir('anygpt-discovery-image-');
  made.push(dir);
  // The image's `/`: the non-root user must be able to enter it.
  chmodSync(dir, 0o755);
  if (image) {
    const id = execFileSync(engine, ['create', image], { encoding: 'utf8' }).trim();
    try {
      execFileSync('sh', ['-c', `"$0" export "$1" | tar -x -C "$2"`, engine, id, dir]);
    } finally {
      spawnSync(engine, ['rm', id], { stdio: 'ignore' });
    }
    return dir;
  }
  const context = tempDir('anygpt-discovery-image-context-');
  made.push(context);
  stage(join(root, 'target', hostTriple(), 'debug', 'anygpt-discovery'), context);
  cpSync(join(context, 'rootfs'), dir, { recursive: true });
  mkdirSync(join(dir, 'home'), { recursive: true });
  cpSync(join(context, 'home'), join(dir, 'home', 'gateway'), { recursive: true });
  chownSync(join(dir, 'home', 'gateway'), IMAGE_UID, IMAGE_UID);
  mkdirSync(join(dir, 'usr', 'local', 'bin'), { recursive: true });
  cpSync(join(context, 'anygpt-discovery'), join(dir, BINARY));
  return dir;
}

/**
 * Running as the image's user in a root of the image's own files takes `chroot` and `chown`,
 * which only root may do. CI runs as root, so there these tests always run; a developer's
 * unprivileged `npm test` is told why they did not.
 */
const needsRoot = process.getuid?.() !== 0 && 'needs root (chroot into the image files as its user): CI runs it as root';

/** `chroot` arguments that run `args` of the image's binary in `dir` as the image's user. */
function inImage(dir, args) {
  return ['--userspec', `${IMAGE_UID}:${IMAGE_UID}`, dir, BINARY, ...args];
}

test('the image runs its binary as a non-root user, with the config from a mounted file and auth required over HTTP', () => {
  assert.match(containerfile, /^FROM scratch$/m);
  assert.match(containerfile, /^USER 65532:65532$/m);
  assert.match(containerfile, /^ENTRYPOINT \["\/usr\/local\/bin\/anygpt-discovery"\]$/m);
  assert.match(containerfile, /^CMD \["serve", "--http", "0\.0\.0\.0:8080"\]$/m);
  assert.equal(imageEnv().ANYGPT_DISCOVERY_CONFIG, '/config/mcp-discovery.config.json');
  if (image) {
    const config = JSON.parse(execFileSync(engine, ['image', 'inspect', '--format', '{{json .Config}}', image], { encoding: 'utf8' }));
    assert.equal(config.User, '65532:65532');
    assert.deepEqual(config.Cmd, ['serve', '--http', '0.0.0.0:8080']);
  }
});

test("the image's binary runs alone in the image's files: --version, and what it reads", { skip: needsRoot }, () => {
  const dir = imageRoot();
  const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
  const run = spawnSync(CHROOT, inImage(dir, ['--version']), { env: imageEnv(), encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout.trim(), `anygpt-discovery ${version}`);
  // The config it reads is the mounted file the image names.
  const path = spawnSync(CHROOT, inImage(dir, ['config', 'path']), { env: imageEnv(), encoding: 'utf8' });
  assert.equal(path.status, 0, path.stderr);
  assert.match(path.stdout, /^Config file: \/config\/mcp-discovery\.config\.json \(named by \$ANYGPT_DISCOVERY_CONFIG/);
});

test("stdio as `docker run -i --rm` runs it: search, details and execute through the SDK client, a remote server reached by name", { skip: needsRoot }, async () => {
  const dir = imageRoot();
  const { child: everything, port } = await startHttpEverything();
  // What the container runtime writes, and the mounted config: the server by a name the
  // binary resolves from the image's files alone (no NSS modules beside it).
  writeFileSync(join(dir, 'etc', 'hosts'), '127.0.0.1 localhost everything.test\n');
  const config = { discovery: { servers: [{ name: 'remote', connection: { type: 'http', url: `http://everything.test:${port}/mcp` } }] } };
  writeFileSync(join(dir, 'config', 'mcp-discovery.config.json'), JSON.stringify(config));
  const transport = new StdioClientTransport({ command: CHROOT, args: inImage(dir, ['serve']), env: imageEnv(), stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const client = new Client({ name: 'anygpt-discovery-image-test', version: '0.0.0' });
  try {
    await client.connect(transport);
    const answer = async (name, args) => JSON.parse((await client.callTool({ name, arguments: args })).content[0].text);
    const found = await answer('search_tools', { query: 'echo' });
    assert.deepEqual([found.results[0]?.server, found.results[0]?.tool], ['remote', 'echo'], `${JSON.stringify(found)}\n${stderr}`);
    const details = await answer('get_tool_details', { server: 'remote', tool: 'echo' });
    assert.ok(details.inputSchema.properties.message, JSON.stringify(details));
    const result = await client.callTool({ name: 'execute_tool', arguments: { server: 'remote', tool: 'echo', arguments: { message: 'from the image' } } });
    assert.equal(result.content[0].text, 'Echo: from the image', stderr);
    const { servers } = await answer('list_mcp_servers', {});
    assert.equal(servers[0].status, 'connected');
  } finally {
    await client.close();
    everything.kill();
  }
});

test('HTTP as the image serves a team: a token of a local issuer gets search, details and execute through the SDK client; no token gets 401', { skip: needsRoot }, async () => {
  const dir = imageRoot();
  const { child: everything, port } = await startHttpEverything();
  writeFileSync(join(dir, 'etc', 'hosts'), '127.0.0.1 localhost everything.test\n');
  // The issuer's published keys, mounted beside the config as a JWK Set file.
  const issuer = 'https://id.image.test/realms/team';
  const scope = 'mcp:tools';
  const key = signingKey('image-key-1');
  writeFileSync(join(dir, 'config', 'jwks.json'), JSON.stringify({ keys: [key.jwk] }));
  const config = {
    discovery: {
      servers: [{ name: 'remote', connection: { type: 'http', url: `http://everything.test:${port}/mcp` } }],
      http: { auth: { issuers: [{ issuer, jwksFile: '/config/jwks.json', requiredScopes: [scope] }] } },
    },
  };
  writeFileSync(join(dir, 'config', 'mcp-discovery.config.json'), JSON.stringify(config));
  // As the image's CMD serves, on loopback (this runs in the host's network).
  const served = spawn(CHROOT, inImage(dir, ['serve', '--http', '127.0.0.1:0']), { env: imageEnv(), stdio: ['ignore', 'ignore', 'pipe'] });
  let client;
  try {
    const gateway = await listening(served);
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } };
    const none = await fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(initialize),
    });
    assert.equal(none.status, 401, gateway.stderr());
    assert.ok(none.headers.get('www-authenticate').includes(`resource_metadata="${gateway.base}/.well-known/oauth-protected-resource/mcp"`), none.headers.get('www-authenticate'));

    const now = Math.floor(Date.now() / 1000);
    const token = signedJwt(key, { iss: issuer, aud: gateway.url, sub: 'alice', iat: now, exp: now + 600, scope });
    client = new Client({ name: 'anygpt-discovery-image-test', version: '0.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    const answer = async (name, args) => JSON.parse((await client.callTool({ name, arguments: args })).content[0].text);
    const found = await answer('search_tools', { query: 'echo' });
    assert.deepEqual([found.results[0]?.server, found.results[0]?.tool], ['remote', 'echo'], `${JSON.stringify(found)}\n${gateway.stderr()}`);
    const details = await answer('get_tool_details', { server: 'remote', tool: 'echo' });
    assert.ok(details.inputSchema.properties.message, JSON.stringify(details));
    const result = await client.callTool({ name: 'execute_tool', arguments: { server: 'remote', tool: 'echo', arguments: { message: 'over HTTP from the image' } } });
    assert.equal(result.content[0].text, 'Echo: over HTTP from the image', gateway.stderr());
    await client.close();
    client = undefined;
    // The container runtime stops it with SIGTERM (STOPSIGNAL): it drains and exits cleanly.
    served.kill('SIGTERM');
    assert.equal(await gateway.exit, 0, gateway.stderr());
  } finally {
    await client?.close();
    served.kill();
    everything.kill();
  }
});
