/**
 * Maps a key path (`["channels", 1, "type"]`) to its line and column in TOML source, so
 * every config error can say where to look. smol-toml gives positions only for syntax
 * errors; this scanner follows table headers, arrays of tables and dotted keys, and is
 * deliberately forgiving: an unknown shape only loses precision, never throws.
 */
export interface SourcePosition {
  line: number;
  column: number;
}

type PathPart = string | number;

function splitDotted(name: string): string[] {
  const parts: string[] = [];
  const re = /\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*(?:\.|$)/gy;
  let m: RegExpExecArray | null;
  while (re.lastIndex < name.length && (m = re.exec(name))) parts.push(m[1] ?? m[2] ?? m[3] ?? '');
  return parts;
}

const key = (path: readonly PathPart[]) => JSON.stringify(path);

/** Net count of unclosed `[` outside strings: tells whether a value continues on later lines. */
function bracketDepth(text: string): number {
  let depth = 0;
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = null;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#') break;
    else if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') depth--;
  }
  return depth;
}

export class SourceMap {
  readonly #positions = new Map<string, SourcePosition>();

  constructor(source: string) {
    const arrayIndex = new Map<string, number>();
    let table: PathPart[] = [];
    let depth = 0;
    let inMultiline: string | null = null;
    // A header like [channels.backoff] belongs to the newest [[channels]] entry.
    const resolve = (parts: string[]): PathPart[] => {
      const out: PathPart[] = [];
      const names: string[] = [];
      for (const p of parts) {
        out.push(p);
        names.push(p);
        const idx = arrayIndex.get(key(names));
        if (idx !== undefined) out.push(idx);
      }
      return out;
    };
    source.split(/\r?\n/).forEach((raw, i) => {
      const line = i + 1;
      if (inMultiline) {
        if (raw.includes(inMultiline)) inMultiline = null;
        return;
      }
      if (depth > 0) {
        depth += bracketDepth(raw);
        return;
      }
      const text = raw.trim();
      const indent = raw.length - raw.trimStart().length;
      if (text === '' || text.startsWith('#')) return;
      const aot = /^\[\[\s*(.+?)\s*\]\]/.exec(text);
      const tbl = aot ? null : /^\[\s*(.+?)\s*\]/.exec(text);
      if (aot) {
        const parts = splitDotted(aot[1]!);
        const parent = resolve(parts.slice(0, -1));
        const id = key(parts);
        const next = (arrayIndex.get(id) ?? -1) + 1;
        arrayIndex.set(id, next);
        table = [...parent, parts.at(-1)!, next];
        this.#set(table, line, indent + 1);
        return;
      }
      if (tbl) {
        table = resolve(splitDotted(tbl[1]!));
        this.#set(table, line, indent + 1);
        return;
      }
      const kv = /^((?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.\- ]+?)+?)\s*=\s*/.exec(text);
      if (!kv) return;
      const path = [...table, ...splitDotted(kv[1]!)];
      this.#set(path, line, indent + kv[0].length + 1, indent + 1);
      const value = text.slice(kv[0].length);
      for (const q of ['"""', "'''"]) {
        if (value.startsWith(q) && value.indexOf(q, 3) === -1) inMultiline = q;
      }
      if (!inMultiline) depth = Math.max(0, bracketDepth(value));
    });
  }

  #set(path: PathPart[], line: number, column: number, keyColumn?: number) {
    this.#positions.set(key(path), { line, column });
    if (keyColumn !== undefined) this.#positions.set(key([...path, '#key']), { line, column: keyColumn });
  }

  /**
   * The closest known position for `path`: the key itself, else its nearest parent.
   * With `atKey`, the column of the key name rather than its value (for unknown keys).
   */
  find(path: readonly PathPart[], atKey = false): SourcePosition | undefined {
    if (atKey) {
      const hit = this.#positions.get(key([...path, '#key']));
      if (hit) return hit;
    }
    for (let n = path.length; n >= 0; n--) {
      const hit = this.#positions.get(key(path.slice(0, n)));
      if (hit) return hit;
    }
    return undefined;
  }
}

export function formatPath(path: readonly PathPart[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${p}` : p;
  return out || '(top level)';
}
