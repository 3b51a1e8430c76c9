import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { readChannelList } from '../../../channels/mattermost/channel-list.js';

/**
 * The bot's channel list read against a server answering what a test writes: the shapes real
 * Mattermost sends (its AppError inside a streamed list) and what a broken or hostile one could.
 */
describe('Mattermost: the channel list as a server may stream it', () => {
  const stop = new AbortController();
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
    close = undefined;
  });

  /** A server answering every request with `answer`; `read` lists its channels. */
  async function serve(answer: (res: ServerResponse) => void | Promise<void>) {
    const server = createServer((_req, res) => void answer(res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    close = async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    };
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return async () => {
      const ids: string[] = [];
      await readChannelList({ url, token: 't' }, 'users/me/channels', (c) => ids.push(c.id), stop.signal);
      return ids;
    };
  }
  const ok = (res: ServerResponse, body: string) => void res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  const channel = (id: string, extra: Record<string, unknown> = {}) => JSON.stringify({ id, type: 'O', name: id, team_id: 'team', last_post_at: 1, ...extra });
  const appError = (id: string, status: number, message: string) => JSON.stringify({ id, message, detailed_error: '', request_id: 'r', status_code: status });

  it('a list nested deeper than channels reach ("[" and 64 more) is refused with an error naming the bound; a channel as nested as real ones is read', async () => {
    const deep = await serve((res) => ok(res, `[${'['.repeat(64)}`));
    await expect(deep()).rejects.toThrow('HTTP 200: a channel in the list nested deeper than 32 levels');

    // The deepest the server nests: props.channel_mentions, an object per channel named.
    const mentions = { props: { channel_mentions: { 'town-square': { display_name: 'Town Square', team_name: 'acme' } } } };
    const real = await serve((res) => ok(res, `[${channel('a', mentions)}\n,${channel('b')}\n]`));
    expect(await real()).toEqual(['a', 'b']);
  });

  it("the server's AppError in the list is its failure: first (no page read) or straight after a channel (a later page failed)", async () => {
    const first = await serve((res) => ok(res, `[${appError('app.channel.get_channels.get.app_error', 500, 'Unable to get the channels.')}`));
    await expect(first()).rejects.toMatchObject({
      name: 'MattermostApiError',
      status: 500,
      inList: true,
      errorId: 'app.channel.get_channels.get.app_error',
      message: 'HTTP 500 app.channel.get_channels.get.app_error: Unable to get the channels.',
    });
    const later = await serve((res) => ok(res, `[${channel('a')}\n${appError('app.channel.get_channels.get.app_error', 500, 'Unable to get the channels.')}`));
    await expect(later()).rejects.toMatchObject({ status: 500, errorId: 'app.channel.get_channels.get.app_error' });
  });

  it('the not-found as the first element (the bot is in no channel) is a list without channels', async () => {
    const none = await serve((res) => ok(res, `[${appError('app.channel.get_channels.not_found.app_error', 404, 'No channels were found.')}`));
    expect(await none()).toEqual([]);
  });

  it("a refusal's AppError keeps characters the body's chunks split", async () => {
    const message = 'Accès refusé — überprüfen Sie die Berechtigungen ✓ 🔒';
    const bytes = Buffer.from(appError('api.context.permissions.app_error', 403, message));
    // Cut after each character's first byte, each piece sent once the last is on its way.
    const cuts = [...bytes.keys()].filter((i) => (bytes[i]! & 0xc0) === 0x80 && (bytes[i - 1]! & 0xc0) === 0xc0);
    const refusing = await serve(async (res) => {
      res.writeHead(403, { 'content-type': 'application/json' });
      let from = 0;
      for (const at of [...cuts, bytes.length]) {
        const piece = bytes.subarray(from, at);
        from = at;
        await new Promise<void>((resolve) => res.write(piece, () => setImmediate(resolve)));
      }
      res.end();
    });
    expect(cuts.length).toBeGreaterThan(5);
    await expect(refusing()).rejects.toMatchObject({ status: 403, inList: false, message: `HTTP 403 api.context.permissions.app_error: ${message}` });
  });
});
