#!/usr/bin/env node
// `npm run image [-- --binary FILE] [--tag NAME]`
//
// Builds the release binary (unless --binary names one), stages the build context of
// Containerfile in target/image-context, builds the image with podman (docker when podman is
// missing), then runs __test__/image.test.mjs against the binary and files of the built image
// (exported with `podman create` + `podman export`).
//
// The image is FROM scratch. Its binary is the one `npm run build` makes (glibc 2.17 through
// cargo-zigbuild when it is on PATH), with exactly the shared libraries `ldd` names for it
// copied to the same paths, so it runs as it does on the build machine; a static binary (no
// interpreter, no libraries) goes in alone. A static musl binary needs the musl Rust std,
// which this development machine cannot install (rustup has no network here, Debian ships
// none); see README "Run in a container".
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const log = (line) => process.stderr.write(`${line}\n`);
/** Where the CA certificates of the build machine are (Debian's ca-certificates). */
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
/** The image's user, as Containerfile and image/rootfs/etc/passwd name it. */
export const IMAGE_UID = 65532;

/**
 * The shared libraries `binary` loads, and its interpreter, as absolute paths (what `ldd`
 * prints); empty for a static binary.
 */
export function runtimeLibraries(binary) {
  const run = spawnSync('ldd', [binary], { encoding: 'utf8' });
  const text = `${run.stdout}${run.stderr}`;
  if (/not a dynamic executable|statically linked/.test(text)) return [];
  if (run.status !== 0) throw new Error(`ldd ${binary} failed: ${text.trim()}`);
  const paths = [];
  for (const line of text.split('\n')) {
    // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` or `/lib64/ld-linux-x86-64.so.2 (0x…)`;
    // the vDSO has no file.
    const match = /(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/.exec(line);
    if (match) paths.push(match[1]);
    else if (/=>\s*not found/.test(line)) throw new Error(`${binary} needs a library this machine lacks: ${line.trim()}`);
  }
  return paths;
}

/**
 * Stage the build context of Containerfile in `context`: `anygpt-discovery` (the binary),
 * `rootfs/` (image/rootfs, the libraries, the CA bundle, /tmp, /config) and `home/` (the
 * user's home). Returns the libraries copied.
 */
export function stage(binary, context) {
  rmSync(context, { recursive: true, force: true });
  const rootfs = join(context, 'rootfs');
  cpSync(join(root, 'image', 'rootfs'), rootfs, { recursive: true });
  if (!existsSync(CA_BUNDLE)) {
    throw new Error(`${CA_BUNDLE} is missing: the image needs CA certificates to reach https servers (apt-get install ca-certificates)`);
  }
  mkdirSync(join(rootfs, dirname(CA_BUNDLE)), { recursive: true });
  copyFileSync(CA_BUNDLE, join(rootfs, CA_BUNDLE));
  const libraries = runtimeLibraries(binary);
  for (const library of libraries) {
    // Copied under the name the binary asks for, with the content of the file it resolves to.
    mkdirSync(join(rootfs, dirname(library)), { recursive: true });
    copyFileSync(realpathSync(library), join(rootfs, library));
    chmodSync(join(rootfs, library), 0o755);
  }
  for (const [dir, mode] of [['tmp', 0o1777], ['config', 0o755]]) {
    mkdirSync(join(rootfs, dir), { recursive: true });
    chmodSync(join(rootfs, dir), mode);
  }
  mkdirSync(join(context, 'home'), { recursive: true });
  chmodSync(join(context, 'home'), 0o700);
  copyFileSync(binary, join(context, 'anygpt-discovery'));
  chmodSync(join(context, 'anygpt-discovery'), 0o755);
  return libraries;
}

/** podman, else docker: whichever answers `--version`. */
function containerEngine() {
  for (const engine of ['podman', 'docker']) {
    if (spawnSync(engine, ['--version'], { stdio: 'ignore' }).status === 0) return engine;
  }
  throw new Error('neither podman nor docker is on PATH: install podman (apt-get install podman) and run again');
}

function option(argv, name) {
  const i = argv.indexOf(name);
  return i === -1 ? undefined : argv[i + 1];
}

async function main(argv) {
  const known = new Set(['--binary', '--tag']);
  for (let i = 0; i < argv.length; i += 2) {
    if (!known.has(argv[i])) throw new Error(`unknown argument ${argv[i]}; usage: npm run image -- [--binary FILE] [--tag NAME]`);
  }
  const version = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
  const tag = option(argv, '--tag') ?? `anygpt-discovery:${version}`;
  const engine = containerEngine();
  let binary = option(argv, '--binary');
  if (binary) binary = resolve(binary);
  else {
    const { build } = await import('./build.mjs');
    binary = build({ release: true }).binary;
  }
  const context = join(root, 'target', 'image-context');
  const libraries = stage(binary, context);
  log(libraries.length ? `binary loads ${libraries.join(', ')}: copied into the image` : 'static binary: nothing else goes in');
  const build = [engine, ['build', '-f', join(root, 'Containerfile'), '-t', tag, context]];
  log(`$ ${build[0]} ${build[1].join(' ')}`);
  execFileSync(...build, { stdio: 'inherit' });
  const size = execFileSync(engine, ['image', 'inspect', '--format', '{{.Size}}', tag], { encoding: 'utf8' }).trim();
  log(`${tag}: ${(Number(size) / 1e6).toFixed(1)} MB (binary ${(statSync(binary).size / 1e6).toFixed(1)} MB)`);
  // The image's own files, run as the image runs them.
  execFileSync(process.execPath, ['--test', '--test-reporter=spec', join(root, '__test__', 'image.test.mjs')], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, ANYGPT_IMAGE: tag, ANYGPT_IMAGE_ENGINE: engine },
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).catch((error) => {
    log(`image: ${error.message}`);
    process.exit(1);
  });
}
