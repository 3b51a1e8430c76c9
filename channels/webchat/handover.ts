import type { ServerFrame } from './protocol.js';

/**
 * `channeld upgrade`: the web chat's tabs (each a backlog of both sides of its conversation)
 * go from the old process to the new one, so a tab that reconnects there is restored. The
 * old process reads them just before it closes the tabs' sockets, and once more when the
 * turns still running there ended: then only the tabs those turns answered (or deleted a
 * draft of) since. The new process merges each into what it has, in conversation order, and
 * sends a tab's open sockets only what is new or changed. The handed-over state is bounded
 * (the upgrade channel takes at most 64 KiB), so the most recently used tabs go first and a
 * tab's oldest entries are left out where the rest would not fit.
 */
export type BacklogEntry =
  | { from: 'user'; id: string; text: string }
  | { from: 'bot'; text: string; final: boolean; buttons?: Array<{ label: string; data: string }> };

export interface HandedTab {
  id: string;
  lastSeenMs: number;
  /** `[key, entry]` in conversation order; keys are `user:<id>` or `bot:<ref>`. */
  backlog: Array<[string, BacklogEntry]>;
  /** `bot:<ref>` keys of replies deleted since the hand-over (a draft's extra part). */
  deleted?: string[];
}

/** What a tab holds, as handed over. */
export interface TabBacklog {
  lastSeenMs: number;
  backlog: ReadonlyMap<string, BacklogEntry>;
  deleted?: ReadonlySet<string>;
}

/** Below the upgrade channel's 64 KiB, with room for the envelope around it. */
export const MAX_HANDOVER_BYTES = 60 * 1024;
const MAX_TABS = 200;
const MAX_ENTRIES = 100;
const MAX_TEXT = 16_000;

/** The tabs to hand over, most recently used first, within MAX_HANDOVER_BYTES. */
export function tabsToHandOver(tabs: ReadonlyArray<[string, TabBacklog]>): { tabs: HandedTab[] } {
  const out: HandedTab[] = [];
  let bytes = 0;
  for (const [id, tab] of [...tabs].reverse()) {
    if (out.length >= MAX_TABS) break;
    const deleted = [...(tab.deleted ?? [])].slice(-MAX_ENTRIES);
    const kept: Array<[string, BacklogEntry]> = [];
    bytes += id.length + 64 + Buffer.byteLength(JSON.stringify(deleted));
    if (bytes > MAX_HANDOVER_BYTES) break;
    // Newest entries first, so what is left out is the start of the conversation.
    for (const [key, entry] of [...tab.backlog].reverse()) {
      const size = Buffer.byteLength(JSON.stringify([key, entry])) + 1;
      if (bytes + size > MAX_HANDOVER_BYTES) break;
      bytes += size;
      kept.unshift([key, entry]);
    }
    if (!kept.length && !deleted.length) break;
    out.push({ id, lastSeenMs: tab.lastSeenMs, backlog: kept, ...(deleted.length ? { deleted } : {}) });
  }
  return { tabs: out.reverse() };
}

/**
 * `handed` merged into a tab's backlog `here`: an entry both have keeps its place here and
 * takes the handed content; one only handed goes right after the handed entry before it (the
 * reply after its question), or in front. `changed` are the entries that are new or differ:
 * what the tab's open sockets have not seen from this process.
 */
export function mergeBacklog(
  here: ReadonlyMap<string, BacklogEntry>,
  handed: ReadonlyArray<[string, BacklogEntry]>,
): { merged: Array<[string, BacklogEntry]>; changed: Array<[string, BacklogEntry]> } {
  const order = [...here.keys()];
  const entries = new Map(here);
  const changed: Array<[string, BacklogEntry]> = [];
  let at = 0;
  for (const [key, entry] of handed) {
    const i = order.indexOf(key);
    if (i >= 0) at = i + 1;
    else order.splice(at++, 0, key);
    const before = entries.get(key);
    if (before && sameEntry(before, entry)) continue;
    entries.set(key, entry);
    changed.push([key, entry]);
  }
  return { merged: order.map((key) => [key, entries.get(key)!]), changed };
}

function sameEntry(a: BacklogEntry, b: BacklogEntry): boolean {
  if (a.from === 'user' || b.from === 'user') return a.from === b.from && a.text === b.text;
  return a.text === b.text && a.final === b.final && JSON.stringify(a.buttons ?? []) === JSON.stringify(b.buttons ?? []);
}

const str = (v: unknown, max: number): v is string => typeof v === 'string' && v.length <= max;

function entryOf(v: unknown): BacklogEntry | undefined {
  const e = v as Record<string, unknown> | null;
  if (!e || typeof e !== 'object') return undefined;
  if (e.from === 'user' && str(e.id, 128) && str(e.text, MAX_TEXT)) return { from: 'user', id: e.id, text: e.text };
  if (e.from !== 'bot' || !str(e.text, MAX_TEXT) || typeof e.final !== 'boolean') return undefined;
  const buttons = Array.isArray(e.buttons)
    ? e.buttons.filter((b): b is { label: string; data: string } => str(b?.label, 200) && str(b?.data, 2000)).slice(0, 20)
    : [];
  return { from: 'bot', text: e.text, final: e.final, ...(buttons.length ? { buttons } : {}) };
}

/** The tabs in a handed-over state, least recently used first; anything malformed is left out. */
export function handedTabs(state: unknown): HandedTab[] {
  const tabs = (state as { tabs?: unknown } | null)?.tabs;
  if (!Array.isArray(tabs)) return [];
  const out: HandedTab[] = [];
  for (const t of tabs.slice(0, MAX_TABS) as Array<Record<string, unknown> | null>) {
    if (!t || !str(t.id, 64) || typeof t.lastSeenMs !== 'number' || !Array.isArray(t.backlog)) continue;
    const backlog: Array<[string, BacklogEntry]> = [];
    for (const pair of t.backlog.slice(-MAX_ENTRIES) as unknown[]) {
      const [key, raw] = Array.isArray(pair) ? pair : [];
      const entry = entryOf(raw);
      if (str(key, 200) && /^(user|bot):/.test(key) && entry) backlog.push([key, entry]);
    }
    const deleted = Array.isArray(t.deleted) ? t.deleted.slice(-MAX_ENTRIES).filter((k): k is string => str(k, 200) && k.startsWith('bot:')) : [];
    out.push({ id: t.id, lastSeenMs: t.lastSeenMs, backlog, ...(deleted.length ? { deleted } : {}) });
  }
  return out;
}

/** How a backlog entry is replayed to a tab. */
export function backlogFrame(key: string, e: BacklogEntry): ServerFrame {
  return e.from === 'user'
    ? { type: 'message', id: e.id, text: e.text }
    : { type: 'reply', ref: key.slice(4), text: e.text, final: e.final, ...(e.buttons ? { buttons: e.buttons } : {}) };
}
