import type { Button, ChannelAdapter, RelayedReply, TransportOptions } from '../contracts/channel.js';
import type { MessageRef, ReplyTarget } from '../contracts/message.js';
import type { Logger } from '../observe/logger.js';
import type { ClusterServices } from './connect.js';
import { scopeToken } from './partition-key.js';
import { boundView } from '../util/bound-view.js';

/**
 * The largest relayed operation: a reply is bounded by its platform's message length, so
 * this only stops a malformed one (NATS refuses payloads past its max_payload, 1 MiB by default).
 */
export const MAX_RELAY_BYTES = 512 * 1024;

interface Envelope {
  /** The instance that ran the turn: it applied the operation itself and skips its own. */
  from: string;
  reply: RelayedReply;
}

/**
 * The adapter of a channel whose connections are instance-local (`applyRelayed`), with its
 * reply operations relayed: each call made here (the turn runs here) reaches the adapter as
 * before and is then published on the channel's relay subject, a NATS core subject; while
 * the listener runs, this instance applies what the others publish to its own connections.
 * Core NATS keeps one publisher's order to each subscriber, so drafts, edits and the final
 * text arrive in the order the turn wrote them. A publish that fails (NATS away) is logged:
 * the turn's own instance has applied it, and the reply is still stored with its item.
 */
export function relayedAdapter(adapter: ChannelAdapter, channelId: string, s: ClusterServices, log: Logger): ChannelAdapter {
  const apply = adapter.applyRelayed?.bind(adapter);
  if (!apply) return adapter;
  const subject = s.names.relaySubject(scopeToken(channelId));
  const publish = (reply: RelayedReply) => {
    try {
      const body = JSON.stringify({ from: s.instanceId, reply } satisfies Envelope);
      if (Buffer.byteLength(body) > MAX_RELAY_BYTES)
        return void log.warn({ channel: channelId, op: reply.op }, 'reply operation too large to relay to the other instances');
      s.nc.publish(subject, body);
    } catch (err) {
      log.warn({ err, channel: channelId, op: reply.op }, 'reply operation not relayed to the other instances');
    }
  };
  const listen: ChannelAdapter['listen'] = async (deliver, signal, onConnected, onReconnecting, onStandby) => {
    const sub = s.nc.subscribe(subject, {
      callback: (err, msg) => {
        if (err) return void log.warn({ err, channel: channelId }, 'reply relay subscription failed');
        const envelope = envelopeOf(msg.data);
        if (!envelope) return void log.warn({ channel: channelId }, 'unreadable relayed reply operation ignored');
        if (envelope.from === s.instanceId) return;
        try {
          apply(envelope.reply);
        } catch (err) {
          log.warn({ err, channel: channelId, op: envelope.reply.op }, 'relayed reply operation failed');
        }
      },
    });
    try {
      await adapter.listen(deliver, signal, onConnected, onReconnecting, onStandby);
    } finally {
      sub.unsubscribe();
    }
  };
  const relayed: Partial<ChannelAdapter> = {
    listen,
    async send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef> {
      const ref = await adapter.send(target, text, options);
      publish({ op: 'send', target, messageId: ref.messageId, text, final: options.final ?? false, ...buttonsOf(options) });
      return ref;
    },
    async edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void> {
      await adapter.edit(ref, text, options);
      publish({ op: 'edit', ref, text, final: options.final ?? false, ...buttonsOf(options) });
    },
    async delete(ref: MessageRef, options: TransportOptions): Promise<void> {
      await adapter.delete(ref, options);
      publish({ op: 'delete', ref });
    },
    async typing(target: ReplyTarget, options: TransportOptions): Promise<void> {
      await adapter.typing(target, options);
      publish({ op: 'typing', target });
    },
    ...(adapter.finalize
      ? {
          async finalize(refs: readonly MessageRef[], options: TransportOptions): Promise<void> {
            await adapter.finalize!(refs, options);
            publish({ op: 'finalize', refs: [...refs] });
          },
        }
      : {}),
  };
  return boundView(adapter, relayed);
}

const buttonsOf = (o: TransportOptions): { buttons?: Button[] } => (o.buttons ? { buttons: o.buttons } : {});

const isStr = (v: unknown): v is string => typeof v === 'string';
const isRef = (v: unknown): v is MessageRef => isStr((v as MessageRef | null)?.chatId) && isStr((v as MessageRef).messageId);
const isTarget = (v: unknown): v is ReplyTarget => isStr((v as ReplyTarget | null)?.chatId) && isStr((v as ReplyTarget).channelId);

/** The envelope in a relayed message, or undefined when it is not one (another version, a stray publish). */
export function envelopeOf(data: Uint8Array): Envelope | undefined {
  if (data.byteLength > MAX_RELAY_BYTES) return undefined;
  let v: { from?: unknown; reply?: Record<string, unknown> };
  try {
    v = JSON.parse(Buffer.from(data).toString('utf8')) as typeof v;
  } catch {
    return undefined;
  }
  const r = v?.reply;
  if (!isStr(v?.from) || !r || typeof r !== 'object') return undefined;
  const texted =
    isStr(r.text) &&
    typeof r.final === 'boolean' &&
    (r.buttons === undefined || (Array.isArray(r.buttons) && r.buttons.every((b: Button | null) => isStr(b?.label) && isStr(b?.data))));
  const ok =
    (r.op === 'send' && isTarget(r.target) && isStr(r.messageId) && texted) ||
    (r.op === 'edit' && isRef(r.ref) && texted) ||
    (r.op === 'delete' && isRef(r.ref)) ||
    (r.op === 'typing' && isTarget(r.target)) ||
    (r.op === 'finalize' && Array.isArray(r.refs) && r.refs.every(isRef));
  return ok ? { from: v.from, reply: r as unknown as RelayedReply } : undefined;
}
