#!/usr/bin/env node
// `npm run pack:release -- --out <dir> [--version X.Y.Z] [--target TRIPLE]... [--skip-build]
//                                     [--no-main | --main-only]`
//
// Builds the release addon and native binary for every target this machine can build (or the
// --target ones), assembles the platform packages from npm/<key>/, sets one version on all of
// them and the main package's optionalDependencies on every platform package, and `npm pack`s
// the main package and each built platform package into <dir> — nothing else goes there.
// The native binaries go to target/release-assets/ (uploaded to the GitHub release by CI).
//
// Linux targets build with cargo-zigbuild (gnu against glibc 2.17, checked with readelf; musl
// with zig's musl linker); the others with plain cargo. CI packs each platform on its own
// runner (--no-main) and the main package once (--main-only). A target is buildable here when its Rust std is installed
// (and, for Linux targets other than the host, cargo-zigbuild is on PATH); the others are
// listed as left to hosted CI (.github/workflows/release.yml), never faked.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, hasZig, hasZigbuild } from './build.mjs';
import { assertGlibcFloor, GLIBC_FLOOR } from './glibc-floor.mjs';
import { hostTriple } from './host.mjs';
import { cdylibName, exeName, PACKAGE, PLATFORMS, platformOfTriple } from './platforms.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const log = (line) => process.stderr.write(`${line}\n`);
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
// Node refuses to spawn .cmd files without a shell.
const npmOptions = process.platform === 'win32' ? { shell: true } : {};

function parseArgs(argv) {
  const args = { targets: [], skipBuild: false, main: true, platforms: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--out') args.out = argv[++i];
    else if (a === '--version') args.version = argv[++i];
    else if (a === '--target') args.targets.push(argv[++i]);
    else if (a === '--skip-build') args.skipBuild = true;
    else if (a === '--no-main') args.main = false;
    else if (a === '--main-only') args.platforms = false;
    else throw new Error(`unknown argument ${a}; usage: npm run pack:release -- --out <dir> [--version X.Y.Z] [--target TRIPLE]... [--skip-build] [--no-main | --main-only]`);
  }
  if (!args.out) throw new Error('--out <dir> is required: the folder that receives the .tgz files');
  return args;
}

function installedStd() {
  const sysroot = execFileSync('rustc', ['--print', 'sysroot'], { encoding: 'utf8' }).trim();
  const dir = join(sysroot, 'lib', 'rustlib');
  return new Set(readdirSync(dir).filter((t) => existsSync(join(dir, t, 'lib'))));
}

/** Why this machine cannot build `triple`, or undefined when it can. */
function cannotBuild(triple, std, host, zig) {
  if (!std.has(triple)) {
    return `no Rust std for ${triple} installed (\`rustup target add ${triple}\` adds it)`;
  }
  if (triple === host) return undefined;
  if (triple.includes('-linux-')) return zig ? undefined : 'cargo-zigbuild is not on PATH (pip install ziglang cargo-zigbuild)';
  // macOS and Windows toolchains cross-compile to the other arch of their own OS.
  const os = (t) => (t.includes('-apple-') ? 'apple' : t.includes('-windows-') ? 'windows' : 'other');
  if (os(triple) !== 'other' && os(triple) === os(host)) return undefined;
  return `${triple} needs a ${os(triple) === 'apple' ? 'macOS' : 'Windows'} runner`;
}

/**
 * Why the toolchain cannot make `platforms` as published, or undefined when it can: a linux
 * gnu build links against glibc ${GLIBC_FLOOR} through cargo-zigbuild and zig, and plain cargo
 * would link against this machine's glibc (a build of many minutes that then fails the
 * floor check). Checked before anything is built.
 */
export function toolchainProblem(platforms, { zigbuild = hasZigbuild(), zig = hasZig() } = {}) {
  const floored = platforms.filter((p) => p.os === 'linux' && p.libc === 'glibc').map((p) => p.key);
  if (!floored.length || (zigbuild && zig)) return undefined;
  const missing = [!zigbuild && 'cargo-zigbuild', !zig && 'zig'].filter(Boolean).join(' and ');
  return (
    `${missing} not found: ${floored.join(', ')} must link against glibc ${GLIBC_FLOOR}, which needs cargo-zigbuild ` +
    'and zig (plain cargo links against this machine\'s glibc, and the package would not load on older systems). ' +
    'Install both with `pip install cargo-zigbuild` (it brings zig as the `ziglang` package), or ' +
    '`cargo install cargo-zigbuild` and zig on PATH; then run again. Nothing was built.'
  );
}

function pkgJson(file) {
  return JSON.parse(readFileSync(file, 'utf8'));
}

function writeJson(file, value) {
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

/** npm pack `dir` into `out`; returns the tarball's file name. */
function pack(dir, out) {
  const json = execFileSync(npm, ['pack', '--json', '--ignore-scripts', '--pack-destination', out], { cwd: dir, encoding: 'utf8', ...npmOptions });
  const [info] = JSON.parse(json);
  log(`  packed ${info.filename}: ${info.files.length} files, ${info.size} bytes, unpacked ${info.unpackedSize}`);
  return info.filename;
}

function assemblePlatform(platform, version, addon, staging) {
  const dir = join(staging, platform.key);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const template = pkgJson(join(root, 'npm', platform.key, 'package.json'));
  const main = `discovery.${platform.key}.node`;
  if (template.name !== `${PACKAGE}-${platform.key}` || template.main !== main) {
    throw new Error(`npm/${platform.key}/package.json: expected name ${PACKAGE}-${platform.key} and main ${main}`);
  }
  writeJson(join(dir, 'package.json'), { ...template, version });
  copyFileSync(join(root, 'npm', platform.key, 'README.md'), join(dir, 'README.md'));
  copyFileSync(join(root, 'LICENSE'), join(dir, 'LICENSE'));
  copyFileSync(addon, join(dir, main));
  return dir;
}

function assembleMain(version, staging) {
  const dir = join(staging, 'main');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // The files npm would publish from the repository, then the package.json with the version
  // and the optional dependencies on every platform package.
  const listing = JSON.parse(execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', ...npmOptions }));
  for (const { path } of listing[0].files) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    copyFileSync(join(root, path), join(dir, path));
  }
  const manifest = pkgJson(join(root, 'package.json'));
  manifest.version = version;
  manifest.optionalDependencies = Object.fromEntries(PLATFORMS.map((p) => [`${PACKAGE}-${p.key}`, version]));
  writeJson(join(dir, 'package.json'), manifest);
  return dir;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const out = resolve(args.out);
  const version = args.version ?? pkgJson(join(root, 'package.json')).version;
  const host = hostTriple();
  const std = installedStd();
  const zig = hasZigbuild();

  const wanted = !args.platforms ? [] : args.targets.length ? args.targets.map(platformOfTriple) : PLATFORMS;
  const buildable = [];
  for (const platform of wanted) {
    const why = cannotBuild(platform.triple, std, host, zig);
    if (!why) buildable.push(platform);
    else if (args.targets.length) throw new Error(`cannot build ${platform.triple} on this machine: ${why}`);
    else log(`skip ${platform.key}: ${why}; built by hosted CI (.github/workflows/release.yml)`);
  }
  if (args.platforms && !buildable.length) throw new Error('no target can be built on this machine');
  const toolchain = args.skipBuild ? undefined : toolchainProblem(buildable);
  if (toolchain) throw new Error(toolchain);

  mkdirSync(out, { recursive: true });
  const stray = readdirSync(out);
  if (stray.length) throw new Error(`${out} is not empty (${stray.slice(0, 5).join(', ')}): pack:release writes only its own tarballs there`);

  const staging = join(root, 'target', 'release-pack');
  const assets = join(root, 'target', 'release-assets');
  mkdirSync(assets, { recursive: true });
  for (const platform of buildable) {
    const zigbuild = platform.os === 'linux' && zig;
    const how = !zigbuild ? '' : platform.libc === 'glibc' ? `, cargo-zigbuild, glibc ${GLIBC_FLOOR}` : ', cargo-zigbuild';
    log(`build ${platform.key} (${platform.triple}${how})`);
    const { addon, binary } = args.skipBuild
      ? {
          addon: join(root, 'target', platform.triple, 'release', cdylibName(platform.triple)),
          binary: join(root, 'target', platform.triple, 'release', exeName(platform.triple)),
        }
      : build({ release: true, target: platform.triple, zig: zigbuild });
    if (platform.libc === 'glibc') {
      for (const file of [addon, binary]) log(`  ${file}: newest glibc symbol ${assertGlibcFloor(file)} (floor ${GLIBC_FLOOR})`);
    }
    log(`  addon ${statSync(addon).size} bytes, binary ${statSync(binary).size} bytes`);
    copyFileSync(binary, join(assets, `anygpt-discovery-${platform.key}${platform.os === 'win32' ? '.exe' : ''}`));
    pack(assemblePlatform(platform, version, addon, staging), out);
  }
  if (args.main) pack(assembleMain(version, staging), out);
  log(`\n${out}:\n${readdirSync(out).map((f) => `  ${f}`).join('\n')}`);
  const missing = PLATFORMS.filter((p) => !buildable.includes(p)).map((p) => p.key);
  if (args.platforms && missing.length) log(`not built here (hosted CI builds them): ${missing.join(', ')}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    main();
  } catch (error) {
    log(`pack:release: ${error.message}`);
    process.exit(1);
  }
}
