import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ChannelMessage } from '../../src/contracts/message.js';
import { withTempDir } from './fixtures.js';

/** The daemon's inbox as far as the Discord adapter tests need it: keyed by channel and message id, a repeat is dropped (not answered again). */
export class Inbox {
  /** Every delivery, repeats too. */
  readonly all: ChannelMessage[] = [];
  readonly kept = new Map<string, ChannelMessage>();
  readonly deliver = async (m: ChannelMessage): Promise<boolean> => {
    this.all.push(m);
    const key = `${m.channelId}:${m.messageId}`;
    if (this.kept.has(key)) return false;
    this.kept.set(key, m);
    return true;
  };
  texts(from = 0): string[] {
    return this.all.slice(from).map((m) => m.text);
  }
}

/**
 * Channel "dc"'s cursor file path, in a state dir of the test's own (removed when it finishes);
 * `atMs` writes a cursor there first (a restart, not a first start).
 */
export async function discordCursorFile(atMs?: number): Promise<string> {
  const dir = withTempDir('discord-cursor');
  const path = join(dir, 'discord', 'dc.cursor');
  if (atMs !== undefined) {
    await mkdir(join(dir, 'discord'));
    await writeFile(path, `${atMs}\n`);
  }
  return path;
}
