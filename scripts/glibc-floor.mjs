// The newest glibc symbol version a Linux ELF file needs, read with `readelf --dyn-syms`
// (binutils; reads any architecture's ELF, arm64 included): a linux-gnu build must load on
// glibc 2.17, so no symbol may need GLIBC_2.18 or later.
import { execFileSync } from 'node:child_process';

export const GLIBC_FLOOR = '2.17';

function compare(a, b) {
  const [x, y] = [a.split('.').map(Number), b.split('.').map(Number)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d) return d;
  }
  return 0;
}

/** `{ newest, tooNew: [{ symbol, version }] }` for one file. */
export function glibcVersions(file, floor = GLIBC_FLOOR) {
  const dump = execFileSync('readelf', ['--dyn-syms', '--wide', file], { encoding: 'utf8', maxBuffer: 64 << 20 });
  let newest = '0';
  const tooNew = [];
  for (const line of dump.split('\n')) {
    // `   5: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND memcpy@GLIBC_2.14 (3)`
    const match = /\s(\S+?)@{1,2}GLIBC_(\d+(?:\.\d+)+)/.exec(line);
    if (!match) continue;
    const [, symbol, version] = match;
    if (compare(version, newest) > 0) newest = version;
    if (compare(version, floor) > 0) tooNew.push({ symbol, version });
  }
  return { newest, tooNew };
}

/** Throws, naming the symbols, when `file` needs a glibc newer than the floor. */
export function assertGlibcFloor(file, floor = GLIBC_FLOOR) {
  const { newest, tooNew } = glibcVersions(file, floor);
  if (tooNew.length) {
    const list = tooNew.slice(0, 10).map((s) => `${s.symbol}@GLIBC_${s.version}`).join(', ');
    throw new Error(`${file} needs glibc ${newest}, above the floor ${floor}: ${list}`);
  }
  return newest;
}
