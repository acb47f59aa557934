// Catalog snapshots written in the gateway's own format (`src/catalog/snapshot.rs`: file name
// and fingerprint from the launch spec and the gateway version), so a benchmark can serve
// servers from them without ever starting one.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const version = /^version = "([^"]+)"/m.exec(readFileSync(join(root, 'Cargo.toml'), 'utf8'))[1];

// FNV-1a 64 over serde_json's compact text of (name, connection, version), as the gateway does.
function fingerprint(name, connection) {
  let hash = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(JSON.stringify([name, connection, version]))) {
    hash = BigInt.asUintN(64, (hash ^ BigInt(byte)) * 0x100000001b3n);
  }
  return hash.toString(16).padStart(16, '0');
}

/**
 * Write a fresh snapshot of `tools` for server `name` launched by `connection` (field order and
 * defaults as the gateway serializes a ConnectionSpec) into `cache`'s `catalog` folder.
 */
export function writeSnapshot(cache, name, connection, tools) {
  const fp = fingerprint(name, connection);
  const file = { format: 1, gatewayVersion: version, server: name, fingerprint: fp, savedAtMs: Date.now(), tools };
  writeFileSync(join(cache, 'catalog', `${name}-${fp}.json`), JSON.stringify(file));
}

/**
 * Start the gateway `binary` on `config` with `cache` as its cache and state folders (so it
 * serves the snapshots written there), logging warnings only; `onMessage` gets every JSON-RPC
 * message it writes to stdout. Returns the child process.
 */
export function serveSnapshots(binary, config, cache, onMessage) {
  const child = spawn(binary, ['--config', config], {
    env: { ...process.env, ANYGPT_LOG: 'warn', ANYGPT_DISCOVERY_CACHE_DIR: cache, ANYGPT_DISCOVERY_STATE_DIR: cache },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let buffer = '';
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    for (let nl; (nl = buffer.indexOf('\n')) >= 0; ) {
      const message = JSON.parse(buffer.slice(0, nl));
      buffer = buffer.slice(nl + 1);
      onMessage(message);
    }
  });
  return child;
}
