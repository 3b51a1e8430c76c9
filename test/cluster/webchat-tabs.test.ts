import { describe, expect, it, onTestFinished } from 'vitest';
import { partitionOf } from '../../src/cluster/partition-key.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace } from '../helpers/cluster.js';
import { waitFor } from '../helpers/daemon.js';
import { withTempDir } from '../helpers/fixtures.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { webchatChannel } from '../helpers/toml.js';
import { ChatClient, seen } from '../helpers/webchat-client.js';
import type { ClusterStatusJson } from './harness.js';

const skip = await clusterSkipReason();
const PARTITIONS = 16;
const TABS_PER_INSTANCE = 6;
const MESSAGES_PER_TAB = 2;

describe.skipIf(skip !== undefined)(`cluster mode, web chat tabs on two instances${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it(
    'a tab answered by the instance that owns its partition, whichever instance it is connected to: drafts and the final text once each, history restored on reopen',
    async () => {
      const ns = uniqueNamespace();
      onTestFinished(() => dropNamespace(ns));
      // A streamed echo (a word every 150 ms): the answer comes as drafts, then the final text.
      const body = (id: string) =>
        clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 4000\n`) + `[agent]\nprovider = "echo"\necho_delay_ms = 150\n\n` + webchatChannel();
      const members = ['a', 'b'].map((id) => {
        const proc = withDaemonProcess(writeProcessConfig(withTempDir(`tabs-${id}`), body(id)), clusterEnv);
        return { id, proc };
      });
      const urls = await Promise.all(members.map((m) => m.proc.url(90_000)));
      const status = async (url: string) => (await (await fetch(`${url}/status`)).json()) as ClusterStatusJson;
      // Both instances serve half the partitions each.
      let owned: number[][] = [];
      await waitFor(
        async () => {
          const all = await Promise.all(urls.map((u) => status(u).catch(() => undefined)));
          if (all.some((s) => !s)) return false;
          owned = all.map((s) => s!.cluster.partitions.owned);
          return owned.every((o) => o.length === PARTITIONS / 2) && new Set(owned.flat()).size === PARTITIONS;
        },
        scaled(60_000),
        100,
      );
      // Tabs on each instance: half whose partition it owns, half owned by the other one.
      const ownerOf = (tab: string) => owned.findIndex((o) => o.includes(partitionOf(`web:${tab}`, PARTITIONS)));
      const pick = (instance: number) => {
        const here: string[] = [];
        const there: string[] = [];
        for (let i = 0; here.length + there.length < TABS_PER_INSTANCE; i++) {
          const tab = `tab-${instance}-${i}`;
          const list = ownerOf(tab) === instance ? here : there;
          if (list.length < TABS_PER_INSTANCE / 2) list.push(tab);
        }
        return [...here, ...there];
      };
      const tabs = [0, 1].flatMap((instance) => pick(instance).map((tab) => ({ tab, instance, client: new ChatClient(urls[instance]!, tab) })));
      await Promise.all(tabs.map((t) => t.client.opened));
      expect(tabs.filter((t) => ownerOf(t.tab) !== t.instance)).toHaveLength(TABS_PER_INSTANCE);

      const text = (tab: string, k: number) => `${tab} says ${k} alpha beta gamma`;
      for (let k = 0; k < MESSAGES_PER_TAB; k++) {
        for (const t of tabs) t.client.send(text(t.tab, k), `q${k}`);
        await Promise.all(
          tabs.map((t) => t.client.finals(k + 1, 60_000).catch((err: Error) => Promise.reject(new Error(`${t.tab} on ${t.instance}: ${err.message}`)))),
        );
      }
      for (const t of tabs) {
        const replies = t.client.replies();
        const byRef = new Map<string, typeof replies>();
        for (const f of replies) byRef.set(f.ref!, [...(byRef.get(f.ref!) ?? []), f]);
        // One reply message per question, in order: drafts first, then its final text once.
        expect(
          [...byRef.values()].map((fs) => fs.at(-1)!.text?.trimEnd()),
          t.tab,
        ).toEqual(Array.from({ length: MESSAGES_PER_TAB }, (_, k) => text(t.tab, k)));
        for (const fs of byRef.values()) {
          expect(
            fs.filter((f) => f.final),
            t.tab,
          ).toHaveLength(1);
          expect(fs.at(-1)!.final, t.tab).toBe(true);
          expect(fs.length, `${t.tab}: streamed drafts before the final text`).toBeGreaterThan(1);
        }
        t.client.close();
      }
      await Promise.all(tabs.map((t) => t.client.closed));

      // Reopened on the instance it used, each tab finds its whole conversation.
      const reopened = tabs.map((t) => ({ ...t, client: new ChatClient(urls[t.instance]!, t.tab) }));
      await Promise.all(reopened.map((t) => t.client.opened));
      const history = (tab: string) =>
        Array.from({ length: MESSAGES_PER_TAB }, (_, k) => [
          ['message', text(tab, k)],
          ['reply', text(tab, k), true],
        ]).flat();
      await waitFor(() => reopened.every((t) => t.client.frames.length >= 2 * MESSAGES_PER_TAB), scaled(10_000));
      for (const t of reopened) expect(seen(t.client.frames), t.tab).toEqual(history(t.tab));
    },
    scaled(180_000),
  );
});
