'use strict'
// Loads the native addon for this platform: `discovery.<key>.node` beside this file (built
// in a clone by `npm run build`), else the optional dependency `@anygpt/discovery-<key>`
// that npm installs for the matching os/cpu/libc. When neither loads, the error says which
// package was looked for, for which platform, and how to fix it.
// The key rule is kept in step with scripts/platforms.mjs by __test__/install-loader.test.mjs,
// which also shows the error on every platform.

const { existsSync, readFileSync } = require('node:fs')
const { join } = require('node:path')

const PACKAGE = '@anygpt/discovery'
const SUPPORTED = [
  'linux-x64-gnu',
  'linux-arm64-gnu',
  'linux-x64-musl',
  'linux-arm64-musl',
  'darwin-x64',
  'darwin-arm64',
  'win32-x64-msvc',
  'win32-arm64-msvc',
]

/** glibc or musl, on Linux; undefined elsewhere. */
function detectLibc() {
  if (process.platform !== 'linux') return undefined
  // ldd is a script on glibc systems and names musl on musl ones: cheaper than a report.
  try {
    if (readFileSync('/usr/bin/ldd', 'latin1').includes('musl')) return 'musl'
  } catch {}
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : undefined
  if (report?.header?.glibcVersionRuntime) return 'glibc'
  return report?.sharedObjects?.some((file) => /(?:^|\/)(?:libc\.musl-|ld-musl-)/.test(file)) ? 'musl' : 'glibc'
}

/** The platform key of packages and addon files, e.g. `linux-x64-gnu`. */
function platformKey(platform, arch, libc) {
  if (platform === 'linux') return `linux-${arch}-${libc === 'musl' ? 'musl' : 'gnu'}`
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

function loadError(key, libc, attempts) {
  const where = `platform ${process.platform}, arch ${process.arch}${libc ? `, libc ${libc}` : ''}`
  const pkg = `${PACKAGE}-${key}`
  const lines = [`${PACKAGE}: no native binary loaded for ${key} (${where}).`]
  if (!SUPPORTED.includes(key)) {
    lines.push(`There is no prebuilt binary for ${key}; prebuilt: ${SUPPORTED.join(', ')}.`)
    lines.push('Build it from a clone of the repository with a Rust toolchain: `npm ci && npm run build`.')
  } else {
    lines.push(`Looked for the package ${pkg} and for ${join(__dirname, `discovery.${key}.node`)}:`)
    for (const attempt of attempts) lines.push(`  - ${attempt}`)
    lines.push('To fix it:')
    lines.push(
      `  - install with optional dependencies on: ${pkg} is one, and npm skips it under --omit=optional,` +
        ' --no-optional or `omit=optional` in an .npmrc (check `npm config get omit`); then reinstall,' +
        ` or add it directly: npm install ${pkg}@${require('./package.json').version}`,
    )
    lines.push('  - in a clone of the repository: `npm run build` (or `npm run build:debug`) builds the binary for this machine.')
  }
  const error = new Error(lines.join('\n'))
  error.code = 'ANYGPT_DISCOVERY_NO_BINARY'
  return error
}

function loadBinding() {
  const libc = detectLibc()
  const key = platformKey(process.platform, process.arch, libc)
  const attempts = []

  const local = join(__dirname, `discovery.${key}.node`)
  if (existsSync(local)) {
    try {
      return require(local)
    } catch (error) {
      attempts.push(`${local}: exists but does not load: ${error.message}`)
    }
  }

  const pkg = `${PACKAGE}-${key}`
  let pkgJson
  try {
    pkgJson = require.resolve(`${pkg}/package.json`)
  } catch {
    attempts.push(`${pkg}: not installed`)
  }
  if (pkgJson) {
    const version = require(pkgJson).version
    const ours = require('./package.json').version
    if (version !== ours) {
      attempts.push(`${pkg}: version ${version} is installed, ${PACKAGE} ${ours} needs the same version`)
    } else {
      try {
        return require(pkg)
      } catch (error) {
        attempts.push(`${pkg}: installed but does not load: ${error.message}`)
      }
    }
  }
  throw loadError(key, libc, attempts)
}

module.exports = loadBinding()
