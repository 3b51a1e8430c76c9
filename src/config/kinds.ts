import { z } from 'zod';
import type { ChannelDescriptor } from '../contracts/channel.js';
import { CodedError } from '../contracts/errors.js';
import { channelCommonShape, configSchemaWith, coreSecretBases, type ChannelConfig } from './schema.js';

/**
 * The channel kinds this build of channeld runs, as the entry point handed them in
 * (`channels/registry.ts`). Everything in `src/` that depends on a kind asks this: the
 * config schema (common keys + `type` + the kind's own keys, strict, so a kind's key is
 * reported with file:line:col like any other), the secret names, `--help` and start-up.
 */
export class ChannelKinds {
  readonly #byKind = new Map<string, ChannelDescriptor>();
  /** One `[[channels]]` table: a strict object per kind, told apart by `type`. */
  readonly channelSchema: z.ZodType<ChannelConfig>;
  /** The whole file's schema with these kinds' channels. */
  readonly configSchema: ReturnType<typeof configSchemaWith<z.ZodType<ChannelConfig>>>;
  /** Every secret base name of the core and of every kind: an inline one is refused as a secret. */
  readonly secretBases: readonly string[];
  readonly #tables = new Map<string, z.ZodObject>();

  constructor(descriptors: readonly ChannelDescriptor[]) {
    if (descriptors.length === 0) throw new CodedError('CHANNEL_KIND_INVALID', 'no channel kind was handed in; the registry lists at least one');
    for (const d of descriptors) {
      if (this.#byKind.has(d.kind)) throw new CodedError('CHANNEL_KIND_INVALID', `two channel kinds are named "${d.kind}"`);
      const clash = Object.keys(d.config.shape).filter((k) => k in channelCommonShape || k === 'type');
      if (clash.length)
        throw new CodedError(
          'CHANNEL_KIND_INVALID',
          `channel kind "${d.kind}" declares ${clash.map((k) => `"${k}"`).join(', ')}, which every channel has already`,
        );
      this.#byKind.set(d.kind, d);
      // Common keys first, then `type`, then the kind's: the order "did you mean" ties break by.
      this.#tables.set(d.kind, z.strictObject({ ...channelCommonShape, type: z.literal(d.kind), ...d.config.shape }));
    }
    const tables = [...this.#tables.values()] as [z.ZodObject, ...z.ZodObject[]];
    this.channelSchema = z.discriminatedUnion('type', tables) as unknown as z.ZodType<ChannelConfig>;
    this.configSchema = configSchemaWith(this.channelSchema);
    this.secretBases = [...new Set([...descriptors.flatMap((d) => d.secrets.names), ...coreSecretBases])];
  }

  /** The kinds' names in registry order, for messages and `--help`. */
  get names(): string[] {
    return [...this.#byKind.keys()];
  }

  get all(): ChannelDescriptor[] {
    return [...this.#byKind.values()];
  }

  get(kind: string): ChannelDescriptor | undefined {
    return this.#byKind.get(kind);
  }

  /** The descriptor of a parsed channel; its kind is registered, or the schema had refused it. */
  of(channel: Pick<ChannelConfig, 'id' | 'type'>): ChannelDescriptor {
    const d = this.#byKind.get(channel.type);
    if (!d) throw new CodedError('CONFIG_INVALID', `channel "${channel.id}" has type "${channel.type}", which is not one of ${this.names.join(', ')}`);
    return d;
  }

  /** The keys a table of `kind` may hold; of any kind when `kind` is not registered. */
  tableKeys(kind: unknown): string[] {
    const table = typeof kind === 'string' ? this.#tables.get(kind) : undefined;
    if (table) return Object.keys(table.shape);
    return [...new Set([...this.#tables.values()].flatMap((t) => Object.keys(t.shape)))];
  }
}
