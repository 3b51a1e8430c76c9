import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { waitFor } from '../helpers/daemon.js';
import { parseArgs } from 'node:util';
import { HELD_REPLY, NOT_KEPT_REPLY } from '../../src/dispatch/dispatcher.js';
import { FakeLlm } from '../fakes/llm/server.js';
import { visibleText } from '../fakes/telegram/server.js';
import type { DaemonProcess } from '../helpers/process.js';
import { stdioServer } from '../helpers/mcp.js';
import { ChatClient } from '../helpers/webchat-client.js';
import { Fleet } from './fleet.js';

export interface SoakResult {
  sent: number;
  answered: number;
  duplicated: number;
  lost: number;
  /** The messages that got no answer. */
  lostTexts: string[];
  /** Messages sent after the restart (the run goes on until there are at least a few). */
  sentAfterRestart: number;
  /** Messages sent after the restart that got more than one answer: no kill -9 window explains these. */
  duplicatedAfterRestart: string[];
  /**
   * Duplicates the kill -9 explains: the message was unfinished in the inbox when the process
   * died, and exactly one of its two answers is known to the inbox neither then nor at the end
   * (the platform accepted it, the process died before it learned its id; the restarted turn
   * could only send again). docs/PERFORMANCE.md documents this window.
   */
  duplicatedByKill: string[];
  /** Every other duplicate, wherever it happened (during a storage fault, before or after the restart): a bug. */
  duplicatedUnexplained: string[];
  /**
   * Bot messages the platforms (and web chat tabs) show that answer nothing sent there: a
   * reply in another chat, a draft left behind, an error text. Counted from the fakes' stores,
   * independently of the per-message counts; the storage notice is not one.
   */
  strays: string[];
  faults: Record<string, number>;
  restarts: number;
  /** The endless-pagination MCP server's state in `/status` at the end (it must be `failed`, not retried forever). */
  mcpEndless: string;
  /** The 1 byte/s attachment's answer says the file was not read (the download timed out, the turn went on). */
  attachmentNotRead: boolean;
}

/** The state_dir on a tmpfs of its own, so the disk-full episode fills a real filesystem; why not, if it cannot. */
function mountStateDir(dir: string, sizeMb: number): string | undefined {
  mkdirSync(dir, { recursive: true });
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMb}m,mode=0700`, 'tmpfs', dir], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    return String((err as { stderr?: Buffer }).stderr ?? err).trim();
  }
}

/** Writes a filler file until the filesystem is full (ENOSPC). */
function fillDisk(file: string): void {
  const fd = openSync(file, 'w');
  try {
    for (const size of [1 << 20, 64 << 10, 4 << 10, 512]) {
      const chunk = Buffer.alloc(size, 1);
      try {
        for (;;) writeSync(fd, chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
}

const MIN_AFTER_RESTART = 8;
/** A tool server whose `tools/list` never ends: the daemon must give up on it and serve on. */
const ENDLESS_MCP = resolve(import.meta.dirname, '../fixtures/mcp/bad-server.mjs');
/** The download timeout under test: the 1 byte/s attachment outlasts it. */
const ATTACHMENT_TIMEOUT_MS = 2000;

/**
 * Steady traffic on web chat, Telegram, Discord and Slack with faults injected (dropped
 * sockets, 429s, gateway reconnects, Socket Mode refreshes, a slow model, a full disk under
 * the state_dir, another process holding the database's write lock, and one kill -9 with a
 * restart), then a count of final answers per message: each must have exactly one.
 */
export async function soak(seconds: number, log: (s: string) => void = () => {}, answerWaitMs = 90_000): Promise<SoakResult> {
  const llm = new FakeLlm();
  await llm.start();
  const fleet = await new Fleet().start();
  const stateDir = join(fleet.dir, 'state');
  const dbFile = join(stateDir, 'channeld.db');
  /** The inbox as the killed process left it. */
  let inboxAtKill = new Map<string, InboxRow>();
  // Room for the database of the whole run (about 2 MB a minute), and small enough to fill quickly.
  const noMount = mountStateDir(stateDir, 16 + 8 * Math.ceil(seconds / 60));
  if (noMount) log(`soak: no disk-full episode: cannot mount a tmpfs for the state_dir (${noMount})`);
  fleet.write({
    streamMode: 'partial',
    agent: `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\nrequest_timeout_ms = 10000\n\n${stdioServer('endless', ENDLESS_MCP, ['endless'])}`,
    limits: `attachment_timeout_ms = ${ATTACHMENT_TIMEOUT_MS}\n`,
  });
  // Port 0: each process (the first and the one after the kill) says where it listens.
  let url = '';
  const start = async () => {
    const p = fleet.spawn();
    url = await p.url(30_000);
    await waitFor(async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200, 30_000);
    return p;
  };
  let daemon: DaemonProcess = await start();
  const webClients: ChatClient[] = [new ChatClient(url, 'soak')];
  await webClients[0]!.opened;
  /** `chat`: the Telegram chat (the sender's id) the answer belongs in. */
  /** `within`: the answer holds the text among more (the attachment message: its not-read notice, the attachment line). */
  const sent: Array<{ text: string; channel: 'web' | 'tg' | 'dc' | 'sl'; chat?: number; within?: true }> = [];
  /** The 1 byte/s attachment is sent once, after the restart, so its turn is not cut by the kill. */
  let dripSent = false;
  /** How many messages were sent before the restart. */
  let sentBeforeRestart = Infinity;
  const faults: Record<string, number> = {};
  const fault = (name: string, fn: () => void) => {
    faults[name] = (faults[name] ?? 0) + 1;
    fn();
  };
  let restarts = 0;
  let running: Promise<void> = Promise.resolve();
  let episodesRunning = false;
  const dcIds = new Map<string, string>();
  let killedAt = 0;
  /** Discord does not hand a new session what was sent while the bot was offline: no sends then. */
  let discordDown = false;
  const endAt = Date.now() + seconds * 1000;
  const killAt = Date.now() + (seconds * 1000) / 2;
  let n = 0;
  let lastFault = Date.now();
  /** Platforms that never redeliver (web chat without a reconnect, Discord) send nothing while the disk is full: their messages get the notice and the user must resend. */
  let diskFull = false;
  const diskFullAt = noMount ? Infinity : Date.now() + seconds * 1000 * 0.15;
  const lockAt = Date.now() + seconds * 1000 * 0.35;
  const episodeMs = Math.min(3000, seconds * 100);
  const storageOk = async (): Promise<{ state: string; pending_writes: number }> =>
    ((await (await fetch(`${url}/status`)).json()) as { storage: { state: string; pending_writes: number } }).storage;
  const episodes: Array<{ at: number; name: string; run: () => Promise<void> }> = [
    {
      at: diskFullAt,
      name: 'disk full',
      run: async () => {
        const t0 = Date.now();
        log(`soak: disk full from message ${n}`);
        diskFull = true;
        const filler = join(stateDir, 'filler');
        fillDisk(filler);
        await new Promise((r) => setTimeout(r, episodeMs));
        rmSync(filler);
        await waitFor(
          async () => {
            const st = await storageOk();
            return st.state === 'ok' && st.pending_writes === 0;
          },
          60_000,
          100,
        );
        diskFull = false;
        log(`soak: storage ok again ${Date.now() - t0} ms after the disk filled, at message ${n}`);
        // Slack sends unacknowledged events again after its timeout; the fake does so on a reconnect.
        fleet.sl.disconnect();
      },
    },
    {
      at: lockAt,
      name: 'foreign write lock',
      run: async () => {
        log(`soak: another process holds the write lock from message ${n}`);
        const other = new Database(dbFile);
        try {
          other.exec('BEGIN IMMEDIATE');
          await new Promise((r) => setTimeout(r, Math.min(2000, episodeMs)));
          other.exec('ROLLBACK');
        } finally {
          other.close();
        }
        // The daemon commits what waited at its next retry; the kill -9 measures its own window, not this one.
        await waitFor(
          async () => {
            const st = await storageOk();
            return st.state === 'ok' && st.pending_writes === 0;
          },
          30_000,
          50,
        );
      },
    },
  ];
  const faultList: Array<[string, () => void]> = [
    ['telegram dropped sockets', () => fleet.tg.dropConnections()],
    ['telegram 429 on edits', () => fleet.tg.fail('editMessageText', { status: 429, retryAfter: 1 }, 2)],
    ['discord op 7 reconnect', () => fleet.dc.requestReconnect()],
    ['slack disconnect', () => fleet.sl.disconnect()],
    ['slow model', () => llm.script({ kind: 'echo', delayMs: 1500 })],
  ];
  try {
    // A few messages after the restart at least, so what it must not do to them is checked.
    while (Date.now() < endAt || sent.length - sentBeforeRestart < MIN_AFTER_RESTART) {
      const channel = (['web', 'tg', 'dc', 'sl'] as const)[n % 4]!;
      const text = `soak-${n}-${channel}`;
      // One episode at a time: each ends with the store healthy again and nothing waiting.
      const episode = episodesRunning ? undefined : episodes.find((e) => Date.now() > e.at);
      if (episode) {
        episodesRunning = true;
        episodes.splice(episodes.indexOf(episode), 1);
        faults[episode.name] = 1;
        // Runs while the traffic goes on; the loop waits for it before the kill.
        running = episode
          .run()
          .catch((err: unknown) => log(`soak: episode ${episode.name} failed: ${String(err)}`))
          .finally(() => (episodesRunning = false));
      }
      if (diskFull && (channel === 'web' || channel === 'dc')) {
        n++;
        await new Promise((r) => setTimeout(r, 60));
        continue;
      }
      if (channel === 'web') webClients.at(-1)!.send(text, `m${n}`);
      const tgChat = 7000 + (n % 10);
      // Once: a document that arrives at 1 byte/s; the turn goes on after attachment_timeout_ms without it.
      const drip = channel === 'tg' && restarts > 0 && !dripSent;
      if (drip) {
        dripSent = true;
        faults['1 byte/s attachment'] = 1;
        fleet.tg.dmDocument(Buffer.alloc(64, 'x'), { file_name: 'slow.txt', mime_type: 'text/plain', dripMs: 1000 }, `${text}-drip`, {
          id: tgChat,
          first_name: 'u',
        });
        sent.push({ text: `${text}-drip`, channel, chat: tgChat, within: true });
        n++;
        await new Promise((r) => setTimeout(r, 60));
        continue;
      } else if (channel === 'tg') fleet.tg.dm(text, { id: tgChat, first_name: 'u' });
      // Discord's gateway never redelivers: a frame caught between arrival and the inbox
      // commit of a process killed with -9 is lost for any bot. So no Discord traffic in the
      // second before the kill; the other platforms redeliver and keep sending throughout.
      if (restarts === 0 && Date.now() > killAt - 1000) discordDown = true;
      const dcLive = fleet.dc.connected && !discordDown;
      if (channel === 'dc' && dcLive) dcIds.set(text, fleet.dc.dm(text));
      if (channel === 'sl') fleet.sl.push(fleet.sl.dmEvent(text, `U${n % 10}`));
      if (channel !== 'dc' || dcLive) sent.push({ text, channel, ...(channel === 'tg' ? { chat: tgChat } : {}) });
      n++;
      if (Date.now() - lastFault > 2500) {
        const [name, fn] = faultList[Object.values(faults).reduce((a, b) => a + b, 0) % faultList.length]!;
        fault(name, fn);
        lastFault = Date.now();
      }
      if (restarts === 0 && Date.now() > killAt) {
        await running;
        // A message a storage episode held in memory is lost by a kill on a platform that never
        // redelivers (Discord; the README says so): the kill measures its own window, so the held
        // ones are stored first.
        await waitFor(
          async () => ((await (await fetch(`${url}/status`)).json()) as { channels: Array<{ held?: number }> }).channels.every((c) => !c.held),
          30_000,
          50,
        );
        log(`soak: kill -9 and restart after message ${n}`);
        discordDown = true;
        daemon.signal('SIGKILL');
        await daemon.exited;
        killedAt = Date.now();
        inboxAtKill = readInbox(dbFile);
        daemon = await start();
        restarts++;
        sentBeforeRestart = sent.length;
        const c = new ChatClient(url, 'soak');
        await c.opened;
        // As the page does: what the old socket never saw acknowledged is sent again.
        const old = webClients.at(-1)!;
        const acked = new Set(old.frames.filter((f) => f.type === 'ack').map((f) => f.id));
        for (const m of sent) if (m.channel === 'web' && !acked.has(`m${m.text.split('-')[1]}`)) c.send(m.text, `m${m.text.split('-')[1]}`);
        webClients.push(c);
        await waitFor(() => fleet.dc.connected, 10_000);
        discordDown = false;
      }
      await new Promise((r) => setTimeout(r, 60));
    }
    await running;
    log(`soak: sent ${sent.length}; waiting for the answers`);
    /** The platform's ids of the messages answering each sent message (the ids the inbox keeps as reply refs). */
    const answers = () =>
      sent.map(({ text, channel, chat, within }): string[] => {
        switch (channel) {
          case 'tg':
            // In the sender's own chat: an answer anywhere else is lost to them.
            return fleet.tg.messages
              .filter((m) => !m.deleted && m.chatId === chat && isAnswer(visibleText(m.text, m.parseMode), text, within))
              .map((m) => String(m.messageId));
          case 'dc':
            return fleet.dc.messages.filter((m) => !m.deleted && m.content === text).map((m) => m.id);
          case 'sl':
            return fleet.sl.messages.filter((m) => !m.deleted && m.text === text).map((m) => m.ts);
          case 'web': {
            const refs = new Set<string>();
            for (const c of webClients) for (const f of c.replies()) if (f.final && f.text === text) refs.add(f.ref!);
            return [...refs];
          }
          default:
            throw new Error(`soak: no such channel ${String(channel satisfies never)}`);
        }
      });
    const counts = () => answers().map((a) => a.length);
    await waitFor(() => counts().every((c) => c >= 1), answerWaitMs, 250).catch(() => {});
    // Settled before counting: every Telegram update confirmed, every Slack envelope acked,
    // and no turn running or queued, so no answer (a duplicate included) is still on its way.
    const settled = async () => {
      const st = (await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } };
      return fleet.tg.pendingUpdates === 0 && fleet.sl.unacked === 0 && st.turns.list.length === 0;
    };
    await waitFor(settled, 30_000, 100).catch(() => log('soak: the daemon did not settle; counting anyway'));
    const ids = answers();
    const c = ids.map((a) => a.length);
    const lostTexts = sent.filter((_, i) => c[i] === 0).map((m) => m.text);
    const dupTexts = sent.filter((_, i) => c[i]! > 1).map((m) => m.text);
    const duplicatedAfterRestart = sent.filter((_, i) => i >= sentBeforeRestart && c[i]! > 1).map((m) => m.text);
    const strays = findStrays(fleet, webClients, sent);
    const mcp = (await (await fetch(`${url}/status`)).json()) as { mcp_servers?: Array<{ name: string; state: string }> };
    const mcpEndless = mcp.mcp_servers?.find((s) => s.name === 'endless')?.state ?? 'absent';
    log(`soak: the endless-pagination MCP server is ${mcpEndless}`);
    const drip = sent.find((m) => m.within);
    const attachmentNotRead = fleet.tg.messages.some(
      (m) => !m.deleted && drip !== undefined && isAnswer(visibleText(m.text, m.parseMode), drip.text, true) && m.text.includes('slow.txt was not read'),
    );
    // The reply refs the restarted process ended with: stopped first, so every write is committed.
    daemon.signal('SIGTERM');
    await daemon.exited;
    const inboxAtEnd = readInbox(dbFile);
    const byKill = sent.filter((m, i) => c[i]! > 1 && killExplains(m, ids[i]!, inboxAtKill, inboxAtEnd)).map((m) => m.text);
    const duplicatedUnexplained = dupTexts.filter((t) => !byKill.includes(t));
    if (dupTexts.length) {
      log(`soak: more than one answer for ${dupTexts.join(', ')}${byKill.length ? ` (by the kill -9: ${byKill.join(', ')})` : ''}`);
      if (process.env.SOAK_DEBUG)
        for (const t of dupTexts)
          log(
            `${t}: tg ${JSON.stringify(fleet.tg.messages.filter((m) => visibleText(m.text, m.parseMode) === t))} web ${JSON.stringify(webClients.map((w) => w.replies().filter((f) => f.text === t)))}`,
          );
    }
    if (lostTexts.length) {
      log(`soak: no answer for ${lostTexts.join(', ')}`);
      if (process.env.SOAK_DEBUG)
        for (const t of lostTexts)
          log(
            `${t}: web frames ${JSON.stringify(webClients.map((w) => w.frames.filter((f) => f.id === `m${t.split('-')[1]}` || f.text === t)))}; daemon says ${JSON.stringify(daemon.lines.filter((l) => JSON.stringify(l).includes(t) || (l.level as number) >= 40).slice(-8))}`,
          );
      if (process.env.SOAK_DEBUG)
        for (const t of lostTexts) log(`${t}: discord delivery ${JSON.stringify(fleet.dc.delivery.get(dcIds.get(t) ?? ''))}, killed at ${killedAt}`);
    }
    if (strays.length) log(`soak: answers to nothing sent there: ${strays.join(', ')}`);
    return {
      sent: sent.length,
      answered: c.filter((x) => x === 1).length,
      duplicated: c.filter((x) => x > 1).length,
      lost: c.filter((x) => x === 0).length,
      lostTexts,
      sentAfterRestart: sent.length - sentBeforeRestart,
      duplicatedAfterRestart,
      duplicatedByKill: byKill,
      duplicatedUnexplained,
      strays,
      faults,
      restarts,
      mcpEndless,
      attachmentNotRead,
    };
  } finally {
    for (const c of webClients) c.close();
    daemon.signal('SIGTERM');
    await daemon.exited;
    if (!noMount) execFileSync('umount', ['-l', stateDir]);
    await fleet.close();
    await llm.close();
  }
}

/** Whether a bot message answers `text`: equal to it, or (`within`) holding it as a line. */
function isAnswer(shown: string, text: string, within?: true): boolean {
  return within ? shown.split('\n').includes(text) : shown === text;
}

export interface InboxRow {
  state: string;
  /** The platform message ids of its reply refs. */
  refs: string[];
  /** How many rows hold this text: more than one means the message was stored twice. */
  rows: number;
}

/** The inbox's rows by channel and text (the soak's texts are unique), read while no daemon runs. */
function readInbox(file: string): Map<string, InboxRow> {
  // Read-write: after a kill -9 the first connection replays the WAL (a read-only one may refuse to).
  const db = new Database(file);
  try {
    const rows = db.prepare('SELECT channel_id, payload, state, reply_refs FROM inbox').all() as Array<{
      channel_id: string;
      payload: string;
      state: string;
      reply_refs: string;
    }>;
    const out = new Map<string, InboxRow>();
    for (const r of rows) {
      const key = `${r.channel_id}:${(JSON.parse(r.payload) as { text: string }).text}`;
      out.set(key, {
        state: r.state,
        refs: (JSON.parse(r.reply_refs) as Array<{ messageId: string }>).map((ref) => ref.messageId),
        rows: (out.get(key)?.rows ?? 0) + 1,
      });
    }
    return out;
  } finally {
    db.close();
  }
}

/**
 * Whether the kill -9 explains a message answered twice: it was unfinished when the process
 * died, and exactly one answer is an orphan, known to the inbox neither at the kill nor at the
 * end (sent by the killed process before it could store the id; the restarted turn then had
 * nothing to edit). A re-run that sent anew although a ref was stored, two answers from one
 * process, a message stored twice, or a duplicate of a message finished before the kill are
 * not explained.
 */
export function killExplains(m: { text: string; channel: string }, answerIds: string[], atKill: Map<string, InboxRow>, atEnd: Map<string, InboxRow>): boolean {
  const key = `${m.channel}:${m.text}`;
  const before = atKill.get(key);
  const after = atEnd.get(key);
  if (!before || (before.state !== 'pending' && before.state !== 'running') || before.rows > 1 || after?.rows !== 1) return false;
  const known = new Set([...before.refs, ...after.refs]);
  return answerIds.length === 2 && answerIds.filter((id) => !known.has(id)).length === 1;
}

/**
 * Every bot message the fakes hold (and every final web chat reply) that is not the answer to
 * a message sent on that platform, in that chat: read from the platforms' side, so a reply
 * routed to the wrong chat or a draft never cleaned up shows here even though the per-message
 * counts cannot see it.
 */
function findStrays(fleet: Fleet, webClients: ChatClient[], sent: Array<{ text: string; channel: string; chat?: number; within?: true }>): string[] {
  const expected = (channel: string, text: string, chat?: number) =>
    text === HELD_REPLY ||
    text === NOT_KEPT_REPLY ||
    sent.some((m) => m.channel === channel && isAnswer(text, m.text, m.within) && (chat === undefined || m.chat === chat));
  const strays: string[] = [];
  for (const m of fleet.tg.messages) {
    const text = visibleText(m.text, m.parseMode);
    if (!m.deleted && !expected('tg', text, m.chatId)) strays.push(`tg chat ${m.chatId}: ${JSON.stringify(text)}`);
  }
  for (const m of fleet.dc.messages) if (!m.deleted && !expected('dc', m.content)) strays.push(`dc: ${JSON.stringify(m.content)}`);
  for (const m of fleet.sl.messages) if (!m.deleted && !expected('sl', m.text)) strays.push(`sl: ${JSON.stringify(m.text)}`);
  for (const c of webClients) for (const f of c.replies()) if (f.final && !expected('web', f.text ?? '')) strays.push(`web: ${JSON.stringify(f.text)}`);
  return strays;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { minutes: { type: 'string', default: '1' } }, allowPositionals: true });
  const minutes = Number(values.minutes);
  const r = await soak(minutes * 60, (s) => console.error(s));
  console.log(
    `soak ${minutes} min: sent ${r.sent}, answered ${r.answered}, duplicated ${r.duplicated} (${r.duplicatedByKill.length} in the kill -9 window, ${r.duplicatedUnexplained.length} not; ${r.duplicatedAfterRestart.length} after the restart), lost ${r.lost}, stray answers ${r.strays.length}; restarts ${r.restarts}; endless MCP server ${r.mcpEndless}; 1 byte/s attachment ${r.attachmentNotRead ? 'timed out, answered' : 'NOT timed out'}; faults ${JSON.stringify(r.faults)}`,
  );
  process.exitCode = r.duplicated === 0 && r.lost === 0 && r.strays.length === 0 && r.mcpEndless === 'failed' && r.attachmentNotRead ? 0 : 1;
}
