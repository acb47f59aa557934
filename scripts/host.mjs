// The host target triple. `napi build` builds for an explicit triple (target/<triple>/…);
// cargo commands use the same one so nothing compiles twice.
import { execFileSync } from 'node:child_process';

export function hostTriple() {
  const info = execFileSync('rustc', ['-vV'], { encoding: 'utf8' });
  const line = info.split('\n').find((l) => l.startsWith('host: '));
  if (!line) throw new Error('cannot read the host triple from `rustc -vV`');
  return line.slice('host: '.length).trim();
}
