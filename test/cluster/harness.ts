import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeSlack, signSlack } from '../fakes/slack/server.js';
import { FakeTelegram, visibleText } from '../fakes/telegram/server.js';
import { waitFor } from '../helpers/daemon.js';
import { DaemonProcess } from '../helpers/process.js';
import { clusterEnv, clusterToml, dropNamespace, uniqueNamespace } from '../helpers/cluster.js';

const SIGNING = 'signing-secret-123';

/** One instance: its process, its id and its HTTP origin. */
export interface Member {
  id: string;
  proc: DaemonProcess;
  url: string;
  alive: boolean;
}

export interface ClusterStatusJson {
  cluster: {
    instance: string;
    partitions: { owned: number[] };
    leases: Array<{ key: string; owner: string; expired: boolean }>;
    instances: Array<{ id: string; alive: boolean; in_flight?: number }>;
    ops: Record<string, number>;
  };
  turns: { in_flight: number; queued: number };
  channels: Array<{ id: string; state: string }>;
}

/**
 * N channeld processes in cluster mode on one NATS namespace and PostgreSQL schema, a fake
 * Telegram (polling: one listener, leased) and a fake Slack (HTTP events, posted
 * round-robin to every live instance, retried on another when one fails, as Slack does).
 */
export class ProcessCluster {
  readonly tg = new FakeTelegram();
  readonly sl = new FakeSlack();
  readonly ns = uniqueNamespace();
  readonly dir = mkdtempSync(join(tmpdir(), 'channeld-cluster-'));
  readonly members: Member[] = [];
  /** Every process started, killed ones included, for the logs kept on request. */
  readonly #all: Member[] = [];
  #rr = 0;

  constructor(
    private readonly o: {
      echoDelayMs: number;
      leaseTtlMs?: number;
      maxInFlight?: number;
      /** `[cluster] partitions` (16 by default). */
      partitions?: number;
      nodeArgs?: string[];
      streamMode?: 'partial' | 'final';
      /** The `[agent]` table (and its `[[agent.mcp]]` servers) instead of the echo agent. */
      agentToml?: string;
      /** No `instance_id`: each process gets the default (host and pid), as `channeld upgrade` needs. */
      defaultInstanceIds?: boolean;
    },
  ) {}

  get partitions(): number {
    return this.o.partitions ?? 16;
  }

  async start(n: number): Promise<this> {
    await Promise.all([this.tg.start(), this.sl.start()]);
    await Promise.all(Array.from({ length: n }, (_, i) => this.spawn(`p${i}`)));
    await this.settled(n);
    return this;
  }

  #config(id: string): string {
    const file = join(this.dir, `${id}.toml`);
    writeFileSync(
      file,
      `[daemon]\nstate_dir = "${join(this.dir, id)}"\nshutdown_grace_ms = 15000\n[http]\nlisten = "127.0.0.1:0"\n[limits]\nmax_in_flight = ${this.o.maxInFlight ?? 64}\nmax_queued = 2000\n` +
        clusterToml(
          this.ns,
          `${this.o.defaultInstanceIds ? '' : `instance_id = "${id}"\n`}lease_ttl_ms = ${this.o.leaseTtlMs ?? 4000}\npartitions = ${this.partitions}\n`,
        ) +
        (this.o.agentToml ?? `[agent]\nprovider = "echo"\necho_delay_ms = ${this.o.echoDelayMs}\n\n`) +
        `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG"\napi_root = "${this.tg.url}"\nallow_from = ["*"]\nnative_drafts = false\nstream_mode = "${this.o.streamMode ?? 'partial'}"\n\n` +
        `[[channels]]\nid = "sl"\ntype = "slack"\nmode = "http"\nbot_token_env = "SL_BOT"\nsigning_secret_env = "SL_SIGN"\napi_url = "${this.sl.apiUrl}"\nallow_from = ["*"]\nreply_in_thread = false\nnative_stream = false\nstream_mode = "${this.o.streamMode ?? 'partial'}"\n`,
    );
    return file;
  }

  /** Starts (or restarts) the instance `id`. */
  async spawn(id: string): Promise<Member> {
    const proc = new DaemonProcess(this.#config(id), { TG: this.tg.token, SL_BOT: this.sl.botToken, SL_SIGN: SIGNING, ...clusterEnv }, this.o.nodeArgs ?? []);
    // A process that exits before it serves (a refused start) fails here, not after the wait.
    const url = await Promise.race([
      proc.url(90_000),
      proc.exited.then((code) => {
        // What the process printed for a person (its reason, on stderr) first: CI summaries cut long messages.
        const said = proc.lines.filter((l) => !('level' in l)).map((l) => l.msg);
        throw new Error(`instance ${id} exited with ${code} before it served: ${JSON.stringify(said)} ${JSON.stringify(proc.lines.slice(-3))}`);
      }),
    ]);
    const m: Member = { id, proc, url, alive: true };
    this.#all.push(m);
    const i = this.members.findIndex((x) => x.id === id);
    if (i >= 0) this.members[i] = m;
    else this.members.push(m);
    void proc.exited.then(() => (m.alive = false));
    return m;
  }

  live(): Member[] {
    return this.members.filter((m) => m.alive);
  }

  async status(m: Member): Promise<ClusterStatusJson> {
    return (await (await fetch(`${m.url}/status`)).json()) as ClusterStatusJson;
  }

  /**
   * Waits until `n` instances are alive and every partition is owned, shared out evenly (as
   * the balancing aims). On a timeout the error says what each process last showed (alive,
   * partitions owned, the instances it saw alive) and its last warnings, so a run that does
   * not settle can be told apart from a slow one.
   */
  async settled(n: number, timeoutMs = 30_000): Promise<void> {
    let seen = new Map<Member, ClusterStatusJson | undefined>();
    await waitFor(
      async () => {
        const live = this.live();
        const all = await Promise.all(live.map((m) => this.status(m).catch(() => undefined)));
        seen = new Map(live.map((m, i) => [m, all[i]]));
        if (all.some((s) => !s)) return false;
        const owned = all.flatMap((s) => s!.cluster.partitions.owned);
        const even = all.every((s) => s!.cluster.partitions.owned.length >= Math.floor(this.partitions / n));
        return (
          all.length === n &&
          even &&
          new Set(owned).size === this.partitions &&
          owned.length === this.partitions &&
          all[0]!.cluster.instances.filter((i) => i.alive).length === n
        );
      },
      timeoutMs,
      100,
    ).catch((err: unknown) => {
      const state = this.members.map((m) => {
        const s = seen.get(m);
        const warnings = m.proc.lines.filter((l) => typeof l.level === 'number' && l.level >= 40).slice(-4);
        return {
          id: m.id,
          alive: m.alive,
          ...(s ? { instance: s.cluster.instance, owned: s.cluster.partitions.owned, sees: s.cluster.instances.filter((i) => i.alive).map((i) => i.id) } : {}),
          warnings: warnings.map((l) => `${String(l.msg)}${l.err ? `: ${JSON.stringify(l.err).slice(0, 200)}` : ''}`),
        };
      });
      throw new Error(`${(err as Error).message}: the cluster of ${n} did not settle; ${JSON.stringify(state)}`);
    });
  }

  /** The member that holds `key`'s lease now, as the live instances report it. */
  async ownerOf(key: string): Promise<Member | undefined> {
    const s = await this.status(this.live()[0]!);
    const owner = s.cluster.leases.find((l) => l.key === key && !l.expired)?.owner;
    return this.members.find((m) => m.id === owner && m.alive);
  }

  /** Posts a Slack event to the next live instance; on failure, again to another one with X-Slack-Retry-Num. */
  async postSlack(event: Record<string, unknown>): Promise<void> {
    const body = JSON.stringify(this.sl.callback(event));
    for (let attempt = 0; attempt < 50; attempt++) {
      const live = this.live();
      const m = live[this.#rr++ % live.length]!;
      try {
        const headers = {
          'content-type': 'application/json',
          ...signSlack(body, SIGNING),
          ...(attempt ? { 'x-slack-retry-num': String(attempt), 'x-slack-retry-reason': 'http_error' } : {}),
        };
        const res = await fetch(`${m.url}/webhooks/sl`, { method: 'POST', headers, body, signal: AbortSignal.timeout(5000) });
        if (res.ok) return;
      } catch {
        // That instance is gone: Slack retries, here on the next one.
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('no instance accepted the Slack event');
  }

  async close(): Promise<void> {
    for (const m of this.members) if (m.alive) m.proc.child.kill('SIGKILL');
    await Promise.all(this.members.map((m) => m.proc.exited));
    // CHANNELD_CLUSTER_LOGS=<dir> keeps every process's log lines there (to study a slow or failed run).
    const keep = process.env.CHANNELD_CLUSTER_LOGS;
    if (keep) {
      mkdirSync(keep, { recursive: true });
      for (const [i, m] of this.#all.entries()) writeFileSync(join(keep, `${i}-${m.id}.jsonl`), m.proc.lines.map((l) => JSON.stringify(l)).join('\n'));
    }
    await Promise.all([this.tg.close(), this.sl.close()]);
    await dropNamespace(this.ns);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** `Load`'s Telegram users are 50,000 + chat; another load may start its users elsewhere. */
const LOAD_TG_USER_BASE = 50_000;
/** The Telegram user of chat `chat`, counted from `base`. */
export const tgUserId = (chat: number, base = LOAD_TG_USER_BASE): number => base + chat;
/** The Slack DM channel of chat `chat`. */
export const slackChannel = (chat: number): string => `D${String(chat).padStart(8, '0')}`;

/**
 * The scope of conversation `i` when it uses chat `chat`, `tg:<user>` (even `i`, the user
 * `tgUserBase` + chat) or `sl:<channel>` (odd): what the daemon hashes to pick the
 * conversation's partition. `Load` uses the default base.
 */
export function loadScope(i: number, chat: number, tgUserBase = LOAD_TG_USER_BASE): string {
  return i % 2 === 0 ? `tg:${tgUserId(chat, tgUserBase)}` : `sl:${slackChannel(chat)}`;
}

/** The load: `conversations` split between Telegram DMs and Slack DMs, `perConversation` messages each. */
export class Load {
  readonly sent = new Map<string, string[]>();
  /** Every text sent: what a complete answer looks like. */
  readonly #finals = new Set<string>();
  /**
   * `ids` picks the chat each conversation uses (conversation `i` → chat `ids[i]`, `i` when
   * absent): which chats carry the load decides the partitions, so a bench can place them.
   */
  constructor(
    readonly c: ProcessCluster,
    readonly conversations: number,
    readonly perConversation: number,
    readonly ids: readonly number[] = [],
  ) {}

  tgUser(i: number) {
    return { id: tgUserId(this.#chat(i)), first_name: `u${i}` };
  }
  slChannel(i: number) {
    return slackChannel(this.#chat(i));
  }
  #chat(i: number): number {
    return this.ids[i] ?? i;
  }
  text(conv: number, k: number): string {
    return `c${conv} m${k} alpha beta gamma`;
  }

  /** Conversation `i`'s key in `sent`: its scope (see `loadScope`). */
  key(i: number): string {
    return loadScope(i, this.#chat(i));
  }

  /** Sends round `k` of every conversation. */
  async round(k: number): Promise<void> {
    const posts: Promise<void>[] = [];
    for (let i = 0; i < this.conversations; i++) {
      const t = this.text(i, k);
      const key = this.key(i);
      this.sent.set(key, [...(this.sent.get(key) ?? []), t]);
      this.#finals.add(t);
      if (i % 2 === 0) this.c.tg.dm(t, this.tgUser(i));
      else posts.push(this.c.postSlack({ ...this.c.sl.dmEvent(t, `U${i}`), channel: this.slChannel(i) }));
    }
    await Promise.all(posts);
  }

  /** Every bot message of a conversation, in send order, with when it was last written. */
  messages(key: string): Array<{ text: string; lastWriteAt: number }> {
    const [kind, id] = key.split(':') as [string, string];
    if (kind === 'tg') {
      const sends = this.c.tg.callsOf('sendMessage').filter((call) => String(call.body.chat_id) === id);
      return this.c.tg.messages
        .filter((m) => String(m.chatId) === id && !m.deleted)
        .map((m, j) => {
          const edits = this.c.tg.callsOf('editMessageText').filter((call) => String(call.body.chat_id) === id && Number(call.body.message_id) === m.messageId);
          return { text: visibleText(m.text, m.parseMode), lastWriteAt: Math.max(sends[j]?.at ?? 0, ...edits.map((e) => e.at)) };
        });
    }
    const posts = this.c.sl
      .callsOf('chat.postMessage')
      .filter((call) => call.args.channel === id && (call.args.markdown_text === undefined || this.c.sl.markdownText));
    return this.c.sl.messages
      .filter((m) => m.channel === id && !m.deleted)
      .map((m, j) => {
        const edits = this.c.sl.callsOf('chat.update').filter((call) => call.args.ts === m.ts);
        return { text: m.text, lastWriteAt: Math.max(posts[j]?.at ?? 0, ...edits.map((e) => e.at)) };
      });
  }

  /**
   * The texts of a conversation's bot messages, in send order. Cheap, unlike `messages()`:
   * the waits call it for every conversation several times a second, in the process that
   * also serves the fake platforms, so scanning every API call per message here (as
   * `messages()` does for the write times) took CPU from the very load being measured.
   */
  texts(key: string): string[] {
    const [kind, id] = key.split(':') as [string, string];
    if (kind === 'tg') return this.c.tg.messages.filter((m) => String(m.chatId) === id && !m.deleted).map((m) => visibleText(m.text, m.parseMode));
    return this.c.sl.messages.filter((m) => m.channel === id && !m.deleted).map((m) => m.text);
  }

  /** The answers each conversation shows now, in order: complete answers only (drafts being written are left out). */
  answers(key: string): string[] {
    return this.texts(key).filter((t) => this.#finals.has(t) || !this.#isDraft(key, t));
  }

  /** A text that is the start of an answer this conversation expects, but not the whole of it. */
  #isDraft(key: string, text: string): boolean {
    return (this.sent.get(key) ?? []).some((t) => t !== text && t.startsWith(text.trim()));
  }

  /** Messages left unfinished (a draft no turn completed): each must be explained by a kill -9. */
  unfinished(): Array<{ key: string; text: string; lastWriteAt: number }> {
    const finals = new Set([...this.sent.values()].flat());
    return [...this.sent.keys()].flatMap((key) =>
      this.messages(key)
        .filter((m) => !finals.has(m.text))
        .map((m) => ({ key, ...m })),
    );
  }

  /** Sent, answered and finished conversations, for a progress line. */
  progress(): string {
    const answered = [...this.sent.keys()].reduce((n, k) => n + this.answers(k).length, 0);
    const done = [...this.sent.entries()].filter(([k, t]) => this.answers(k).length >= t.length).length;
    return `sent ${[...this.sent.values()].flat().length}, answered ${answered}, conversations done ${done}`;
  }

  complete(): boolean {
    return [...this.sent.entries()].every(([k, texts]) => JSON.stringify(this.answers(k)) === JSON.stringify(texts));
  }

  /** Conversations whose answers differ from what was sent (for a failure message). */
  problems(): string[] {
    return [...this.sent.entries()]
      .filter(([k, t]) => JSON.stringify(this.answers(k)) !== JSON.stringify(t))
      .map(([k, t]) => `${k}: sent ${JSON.stringify(t)} answered ${JSON.stringify(this.answers(k))}`);
  }

  /** Platform messages created: exactly one per user message when nothing was answered twice. */
  created(): number {
    // Messages the platforms hold, not calls: a post Slack refused (markdown_text on a fake
    // without it, which each new process tries once) created nothing.
    return this.c.tg.messages.length + this.c.sl.messages.length;
  }
}
