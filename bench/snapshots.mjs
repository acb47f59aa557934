// Catalog snapshots written in the gateway's own format (`src/catalog/snapshot.rs`: file name
// and fingerprint from the launch spec and the gateway version), so a benchmark can serve
// servers from them without ever starting one.
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
