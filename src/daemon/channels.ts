import type { ChannelConfig } from '../config/schema.js';
import type { ChannelAdapter } from '../contracts/channel.js';
import { ChannelError, CodedError, errorMessage } from '../contracts/errors.js';
import { defineComponent, type DaemonComponent } from './services.js';
import { fileFaultReporter } from '../store/file-faults.js';

/** Stands in for an adapter that could not be built: every call fails with why. */
function unavailableAdapter(id: string, err: ChannelError): ChannelAdapter {
  const fail = () => Promise.reject(err);
  return {
    id,
    selfId: undefined,
    capabilities: { maxMessageLength: 4000, editsDrafts: false, minEditIntervalMs: 0, nativeStream: false, typing: false },
    listen: fail,
    send: fail,
    edit: fail,
    delete: fail,
    typing: fail,
  };
}

/**
 * Why an adapter could not be built, as a fatal channel error. A coded error keeps its code,
 * message and cause (a missing token stays CHANNEL_AUTH_FAILED with its one hint); a module
 * that cannot be found is BUILD_MODULE_MISSING; anything else is CHANNEL_BUILD_FAILED. Fatal either way: retrying cannot build it.
 */
export function unbuildable(err: unknown): ChannelError {
  if (err instanceof ChannelError && !err.retryable) return err;
  if (err instanceof CodedError) {
    const same = new ChannelError(err.code, undefined, { cause: err, retryable: false });
    same.message = err.message;
    return same;
  }
  // A chunk or package that is not there: the platform was never asked, so this is no server error.
  if ((err as NodeJS.ErrnoException | undefined)?.code === 'ERR_MODULE_NOT_FOUND')
    return new ChannelError('BUILD_MODULE_MISSING', errorMessage(err), { cause: err, retryable: false });
  return new ChannelError('CHANNEL_BUILD_FAILED', errorMessage(err), { cause: err });
}

/** One channel as a component: its adapter joins the channel table and the supervisor. */
export function channelComponent(channel: ChannelConfig): DaemonComponent {
  return defineComponent({
    name: `channel:${channel.id}`,
    inject: ['config', 'logger', 'http', 'dispatcher', 'supervisor', 'channels', 'metrics', 'topology', 'storage', 'tracing', 'upgrade'],
    start: async (ctx) => {
      const config = ctx.use('config');
      const log = ctx.use('logger').child({ channel: channel.id });
      const channels = ctx.use('channels');
      const supervisor = ctx.use('supervisor');
      const dispatcher = ctx.use('dispatcher');
      const topology = ctx.use('topology');
      const sharedRecord = topology.sharedRecords(channel.id);
      let adapter: ChannelAdapter;
      try {
        const factory = await config.loaded.kinds.of(channel).load();
        const metrics = ctx.use('metrics');
        adapter = await factory(channel, {
          http: ctx.use('http'),
          log,
          stateDir: config.config.daemon.state_dir,
          maxAttachmentBytes: () => config.config.limits.max_attachment_bytes,
          secret: (base) => config.secrets.get(`channels.${channel.id}`, base),
          evicted: (structure, n) => metrics.evictions.inc({ structure }, n),
          storage: fileFaultReporter(ctx.use('storage'), (code) => metrics.storageFaults.inc({ code }), log),
          duplicateWindowMs: () => topology.intake.duplicateWindowMs(),
          listenerMoves: config.config.cluster !== undefined,
          ...(sharedRecord ? { sharedRecord } : {}),
        });
      } catch (err) {
        // One channel that cannot be built goes through the usual supervision: its listener
        // fails with a fatal error, so it is parked as failed while the others run.
        adapter = unavailableAdapter(channel.id, unbuildable(err));
      }
      // Registered first, so it runs last on unload: after the turns settled, the listener
      // stopped and the channel left the table, no send can follow (the adapter as built,
      // not the cluster gate around it).
      const built = adapter;
      ctx.effect(async () => {
        await built.close?.().catch((err: unknown) => log.warn({ err }, 'closing the channel adapter failed'));
      });
      const kind = config.loaded.kinds.of(channel);
      adapter = topology.gate({ id: channel.id, exclusive: kind.exclusiveListener(channel), parts: kind.listenerParts?.(channel) ?? 1 }, adapter);
      // Outermost, so an upgrade hands over the listener as the supervisor runs it.
      const upgrade = ctx.use('upgrade').wrap(channel.id, adapter, config.loaded.kinds.of(channel).exclusiveListener(channel));
      adapter = upgrade.adapter;
      ctx.effect(upgrade.forget);
      channels.set(channel.id, { config: channel, adapter });
      ctx.effect(() => void channels.delete(channel.id));
      supervisor.add({
        id: channel.id,
        kind: channel.type,
        adapter,
        deliver: ctx.use('tracing').deliver(dispatcher.deliver),
        backoff: channel.backoff,
        connectTimeoutMs: channel.connect_timeout_ms,
      });
      ctx.effect(async () => {
        const grace = config.config.daemon.shutdown_grace_ms;
        await dispatcher.settleChannel(channel.id, grace, channels.removing.has(channel.id));
        await supervisor.remove(channel.id, grace);
      });
    },
  });
}
