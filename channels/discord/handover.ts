import type { Client, IShardingStrategy, SessionInfo, WebSocketOptions } from 'discord.js';

/** @discordjs/ws's manager (discord.js exports its own class under the same name). */
type WebSocketManager = Parameters<NonNullable<WebSocketOptions['buildStrategy']>>[0];

/**
 * `channeld upgrade` for Discord: the old process hands the new one each shard's gateway
 * session (session id, sequence, resume URL) and what READY said about the bot, so the new
 * process sends RESUME, not IDENTIFY, and Discord replays what it missed in between.
 *
 * discord.js has no option for a session to start from; this leans on what ~14.28 does: the
 * `ws.buildStrategy` hook hands over @discordjs/ws's manager, whose `retrieveSessionInfo`
 * option decides between RESUME and IDENTIFY; and a fresh Client that resumed never saw
 * READY, so it is shown the one handed over (then it marks itself ready and lets the queued
 * events through). test/e2e/upgrade.test.ts fails if a discord.js update changes this.
 */
export interface DiscordHandover {
  user: { id: string; username: string; discriminator?: string; global_name?: string | null; bot?: boolean; avatar?: string | null };
  application: { id: string; flags?: number };
  /** The guild ids READY listed (at most MAX_GUILDS): known as unavailable until their GUILD_CREATE. */
  guilds: string[];
  sessions: SessionInfo[];
  /**
   * The old process's catch-up had not finished (cut short by the hand-over, or failed): its
   * cursor stands before a gap that a resumed session does not replay, so the new process
   * keeps it there for its run and the next fresh IDENTIFY (a restart) reads the gap.
   */
  catchUpOwed?: boolean;
}

const MAX_GUILDS = 1000;
const MAX_SHARDS = 128;

const str = (v: unknown, max = 200): v is string => typeof v === 'string' && v.length > 0 && v.length <= max;

/** A handed-over state as the adapter can use it, or undefined when it is not one. */
export function parseHandover(raw: unknown): DiscordHandover | undefined {
  const v = raw as Partial<DiscordHandover> | null;
  if (!v || typeof v !== 'object' || !v.user || !str(v.user.id) || !str(v.user.username) || !v.application || !str(v.application.id)) return undefined;
  if (!Array.isArray(v.sessions) || v.sessions.length > MAX_SHARDS || !Array.isArray(v.guilds)) return undefined;
  const sessions = v.sessions.filter(
    (s) => s && str(s.sessionId) && str(s.resumeURL, 2000) && Number.isInteger(s.sequence) && Number.isInteger(s.shardId) && Number.isInteger(s.shardCount),
  );
  return {
    user: { id: v.user.id, username: v.user.username, bot: true },
    application: { id: v.application.id, flags: typeof v.application.flags === 'number' ? v.application.flags : 0 },
    guilds: v.guilds.filter((g) => str(g, 40)).slice(0, MAX_GUILDS),
    sessions,
    ...(v.catchUpOwed === true ? { catchUpOwed: true } : {}),
  };
}

/** discord.js's own (undocumented) pieces this file uses. */
interface ClientInternals {
  ws: {
    shards: Map<number, { onReadyPacket(p: { guilds: unknown[] }): void; status: number }>;
    handlePacket(packet: { t: string; d: unknown }, shard: unknown): boolean;
  };
}
type ManagerOptions = { retrieveSessionInfo(id: number): unknown; updateSessionInfo(id: number, s: SessionInfo | null): unknown };

/**
 * One Client's side of it: `buildStrategy` for its `ws` options (it resumes the handed
 * sessions, once each), `onResumed` for its `shardResume` event, `capture` and `close`
 * for the old process.
 */
export class GatewayHandover {
  #manager: WebSocketManager | undefined;
  readonly #resume: Map<number, SessionInfo>;
  readonly #from: DiscordHandover | undefined;

  constructor(from: DiscordHandover | undefined) {
    this.#from = from;
    this.#resume = new Map((from?.sessions ?? []).map((s) => [s.shardId, s]));
  }

  /** For `new Client({ ws: { buildStrategy } })`: wraps the manager's session lookup, then builds the default strategy. */
  buildStrategy(manager: WebSocketManager, build: (m: WebSocketManager) => IShardingStrategy): IShardingStrategy {
    this.#manager = manager;
    const options = manager.options as unknown as ManagerOptions;
    const own = options.retrieveSessionInfo.bind(options);
    options.retrieveSessionInfo = (id: number) => {
      const handed = this.#resume.get(id);
      if (!handed) return own(id);
      this.#resume.delete(id);
      // discord.js keeps it from here (it counts replayed events from it).
      options.updateSessionInfo(id, handed);
      return handed;
    };
    return build(manager);
  }

  /** A shard resumed a handed-over session: the fresh Client is shown READY, so it turns ready. */
  onResumed(client: Client, shardId: number): void {
    const from = this.#from;
    const ws = (client as unknown as ClientInternals).ws;
    const shard = ws.shards.get(shardId);
    if (!from || !shard || client.user) return;
    shard.onReadyPacket({ guilds: [] });
    ws.handlePacket({ t: 'READY', d: { user: from.user, application: from.application, guilds: from.guilds.map((id) => ({ id, unavailable: true })) } }, shard);
  }

  /**
   * Old process: every shard's session as it stands, then the gateway closed with 4200 (not
   * 1000, which would end the session at Discord) so the new process can resume it.
   */
  async capture(client: Client): Promise<DiscordHandover | undefined> {
    const manager = this.#manager;
    const user = client.user;
    if (!manager || !user || !client.application) return undefined;
    const options = manager.options as unknown as ManagerOptions;
    const sessions: SessionInfo[] = [];
    for (const id of await manager.getShardIds()) {
      const s = (await options.retrieveSessionInfo(id)) as SessionInfo | null;
      if (s) sessions.push({ ...s });
    }
    await manager.destroy({ code: 4200, reason: 'handed over to the new process' });
    return {
      user: { id: user.id, username: user.username },
      application: { id: client.application.id, flags: client.application.flags?.bitfield ?? 0 },
      guilds: [...client.guilds.cache.keys()].slice(0, MAX_GUILDS),
      sessions,
    };
  }
}
