// The platforms the package ships prebuilt binaries for: one npm package
// `@anygpt/discovery-<key>` per entry, holding `discovery.<key>.node`.
// binding.js keeps its own copy of the key rule (it ships alone); a test checks they agree.

export const PACKAGE = '@anygpt/discovery';
export const BINARY_NAME = 'discovery';

/** `libc` is npm's field (glibc | musl); absent where npm does not filter on it. */
export const PLATFORMS = [
  { key: 'linux-x64-gnu', triple: 'x86_64-unknown-linux-gnu', os: 'linux', cpu: 'x64', libc: 'glibc' },
  { key: 'linux-arm64-gnu', triple: 'aarch64-unknown-linux-gnu', os: 'linux', cpu: 'arm64', libc: 'glibc' },
  { key: 'linux-x64-musl', triple: 'x86_64-unknown-linux-musl', os: 'linux', cpu: 'x64', libc: 'musl' },
  { key: 'linux-arm64-musl', triple: 'aarch64-unknown-linux-musl', os: 'linux', cpu: 'arm64', libc: 'musl' },
  { key: 'darwin-x64', triple: 'x86_64-apple-darwin', os: 'darwin', cpu: 'x64' },
  { key: 'darwin-arm64', triple: 'aarch64-apple-darwin', os: 'darwin', cpu: 'arm64' },
  { key: 'win32-x64-msvc', triple: 'x86_64-pc-windows-msvc', os: 'win32', cpu: 'x64' },
  { key: 'win32-arm64-msvc', triple: 'aarch64-pc-windows-msvc', os: 'win32', cpu: 'arm64' },
];

export function platformOfTriple(triple) {
  const platform = PLATFORMS.find((p) => p.triple === triple);
  if (!platform) {
    throw new Error(`no platform package for target ${triple}; known: ${PLATFORMS.map((p) => p.triple).join(', ')}`);
  }
  return platform;
}

/** The file name cargo gives the cdylib `discovery` on this target. */
export function cdylibName(triple) {
  if (triple.includes('windows')) return `${BINARY_NAME}.dll`;
  if (triple.includes('apple')) return `lib${BINARY_NAME}.dylib`;
  return `lib${BINARY_NAME}.so`;
}

export function exeName(triple) {
  return triple.includes('windows') ? 'anygpt-discovery.exe' : 'anygpt-discovery';
}
