// binding.d.ts from napi-derive's type-def output.
//
// While compiling, napi-derive appends one JSON line per #[napi] item to
// $NAPI_TYPE_DEF_TMP_FOLDER/anygpt-discovery (the folder is set in .cargo/config.toml). This
// renders those lines the way `napi build --dts` does for the kinds this crate uses, so the
// package needs no @napi-rs/cli (whose cross-compiling toolchain npm cannot lock here).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const TYPE_DEF_FILE = join('target', 'napi-type-def', 'anygpt-discovery');

/** The parsed items, each once: two concurrent compiles of the crate may both append. */
export function readTypeDefs(file) {
  const lines = [...new Set(readFileSync(file, 'utf8').split('\n').map((l) => l.trim()).filter(Boolean))];
  return lines.map((line) => {
    const def = JSON.parse(line);
    if (def.js_doc) def.js_doc = def.js_doc.replace(/\\n/g, '\n');
    return def;
  });
}

/** Classes first, then everything else, each by name: napi's order, stable across builds. */
function byKindThenName(a, b) {
  const aClass = a.kind === 'struct';
  const bClass = b.kind === 'struct';
  if (aClass !== bClass) return aClass ? -1 : 1;
  return a.name.localeCompare(b.name);
}

/** Methods (`impl` items) join their class; anything in a js_mod is refused, not dropped. */
function mergeImpls(defs) {
  const classes = new Map();
  const out = [];
  for (const def of defs) {
    if (def.js_mod) throw new Error(`type-def of ${def.name}: #[napi] modules (js_mod) are not supported by scripts/dts.mjs`);
    if (def.kind === 'struct') {
      const merged = { ...def };
      classes.set(def.name, merged);
      out.push(merged);
    }
  }
  for (const def of defs) {
    if (def.kind === 'struct') continue;
    if (def.kind === 'impl' || def.kind === 'extends') {
      const owner = classes.get(def.name);
      if (!owner) throw new Error(`type-def: ${def.kind} of unknown class ${def.name}`);
      if (def.kind === 'extends') owner.extends = def.def;
      else owner.def = owner.def ? `${owner.def}\n${def.def}` : def.def;
      continue;
    }
    out.push(def);
  }
  return out;
}

function render(def) {
  let s = def.js_doc ?? '';
  switch (def.kind) {
    case 'interface':
      s += `export interface ${def.name} {\n${def.def}\n}`;
      break;
    case 'type': {
      const body = def.def.trim();
      s += body.startsWith('|') || body.includes('\n') ? `export type ${def.name} =\n${def.def}` : `export type ${def.name} = ${body}`;
      break;
    }
    case 'enum':
    case 'string_enum':
      s += `export declare const enum ${def.name} {\n${def.def.trim().endsWith(',') ? def.def : `${def.def},`}\n}`;
      break;
    case 'struct': {
      const ext = def.extends ? ` extends ${def.extends}` : '';
      s += `export declare class ${def.name}${ext} ${def.def.trim() ? `{\n${def.def}\n}` : '{}'}`;
      if (def.original_name && def.original_name !== def.name) s += `\nexport type ${def.original_name} = ${def.name}`;
      break;
    }
    case 'fn':
      s += `export declare ${def.def}`;
      break;
    case 'const':
      s += def.def.startsWith('export const ') ? `export declare const ${def.def.slice(13)}` : def.def;
      break;
    default:
      throw new Error(`type-def of ${def.name}: unknown kind ${def.kind}`);
  }
  return indent(s);
}

/** Re-indent by brace depth (napi-derive emits flat lines), two spaces a level. */
function indent(src) {
  let depth = 0;
  return src
    .split('\n')
    .map((raw) => {
      const line = raw.trim();
      if (!line) return '';
      const inComment = line.startsWith('*');
      const net = inComment ? 0 : netBraces(line);
      if (net < 0 && !line.startsWith('|')) depth = Math.max(0, depth + net);
      const pad = depth * 2 + (inComment ? 1 : 0);
      if (net > 0) depth += net;
      else if (line.endsWith('=') && !inComment && net === 0) depth += 1;
      return ' '.repeat(pad) + line;
    })
    .join('\n');
}

function netBraces(line) {
  let net = 0;
  let quote;
  let escaped = false;
  for (const c of line) {
    if (quote) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === quote) quote = undefined;
    } else if (c === "'" || c === '"' || c === '`') quote = c;
    else if (c === '{' || c === '(' || c === '[') net += 1;
    else if (c === '}' || c === ')' || c === ']') net -= 1;
  }
  return net;
}

/** The whole binding.d.ts: the hand-written header, then every item. */
export function renderDts(defs, header) {
  const items = mergeImpls(defs).sort(byKindThenName).map(render);
  return `${header.trimEnd()}\n\n${items.join('\n\n')}\n`;
}
