import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { chunkText } from '../../src/util/chunk.js';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { llmAgent } from '../helpers/toml.js';
import { whatsappChannel, whatsappEnv, withWhatsApp } from '../helpers/whatsapp.js';

const USER = '4915112345678';

describe('WhatsApp, daemon as a real process', () => {
  it('kill -9 mid-answer, start again: exactly one answer, in reply to the message; a late redelivery changes nothing', async () => {
    const wa = await withWhatsApp();
    const llm = await withLlm();
    const file = writeProcessConfig(withTempDir('waproc'), llmAgent(llm.url) + whatsappChannel(wa));
    const env = whatsappEnv(wa);
    const words = Array.from({ length: 30 }, (_, i) => `w${i} `);
    const text = words.join('').trim();
    // The first process's model writes all but the last word and stalls: the turn is
    // mid-answer whenever the kill lands. The restarted process gets the whole text.
    llm.script({ kind: 'stall', chunks: words.slice(0, -1).map((content) => ({ content, delayMs: 50 })) });
    const p1 = withDaemonProcess(file, env);
    wa.webhookUrl = `${await p1.url()}/webhooks/wa`;
    const incoming = wa.textMessage(text);
    const note = wa.notification([incoming]);
    expect(await wa.deliver(note)).toContain(200);
    // The typing indicator went up: the turn runs and its answer is not sent yet (final-text mode).
    await waitFor(() => wa.callsOf('typing').length >= 1 && llm.requests.length === 1, 15_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(wa.sent).toHaveLength(0);

    const p2 = withDaemonProcess(file, env);
    const url = await p2.url();
    wa.webhookUrl = `${url}/webhooks/wa`;
    await waitFor(() => wa.texts(USER)[0] === text, 15_000);
    // Meta delivers the same notification again (it never saw an answer, say): stored once already.
    expect(await wa.deliver(note)).toEqual([200]);
    await waitFor(async () => ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0);
    expect(wa.texts(USER)).toEqual([text]);
    expect(wa.sent[0]!.contextId).toBe(incoming.id);
    expect(llm.requests).toHaveLength(2);
    expect(p2.lines.some((l) => l.msg === 'recovered unfinished messages from the inbox')).toBe(true);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });

  it('kill -9 after the first part of a long answer was sent: the restart sends only the rest, never the first part again', async () => {
    const wa = await withWhatsApp();
    const llm = await withLlm();
    const dir = withTempDir('waproc2');
    const file = writeProcessConfig(dir, llmAgent(llm.url) + whatsappChannel(wa));
    const env = whatsappEnv(wa);
    const paragraphs = Array.from({ length: 60 }, (_, i) => `Paragraph ${i}: ${'word '.repeat(18).trim()}.`);
    const answer = paragraphs.join('\n\n');
    const parts = chunkText(answer, 4096);
    expect(parts).toHaveLength(2);
    // First run: more than one message's worth, then a stall, so the first part goes out early
    // and the turn is still running at the kill. The restart's model gives the whole answer.
    llm.script(
      { kind: 'stall', chunks: [{ content: answer.slice(0, 4600) }] },
      { kind: 'stream', chunks: answer.match(/[\s\S]{1,1000}/g)!.map((content) => ({ content })) },
    );
    const p1 = withDaemonProcess(file, env);
    wa.webhookUrl = `${await p1.url()}/webhooks/wa`;
    expect(await wa.deliver(wa.notification([wa.textMessage('write a lot')]))).toContain(200);
    await waitFor(() => wa.sent.length === 1, 15_000);
    // Killed only once the first part's id is committed (read from the state database).
    const db = new Database(join(dir, 'state', 'channeld.db'), { readonly: true, fileMustExist: true });
    try {
      await waitFor(() =>
        (db.prepare('SELECT reply_refs FROM inbox').all() as Array<{ reply_refs: string }>).some((r) => r.reply_refs.includes(wa.sent[0]!.id)),
      );
    } finally {
      db.close();
    }
    p1.signal('SIGKILL');
    await p1.exited;

    const p2 = withDaemonProcess(file, env);
    const url = await p2.url();
    wa.webhookUrl = `${url}/webhooks/wa`;
    await waitFor(() => wa.sent.length === 2, 15_000);
    await waitFor(async () => ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0);
    expect(wa.sent.map((m) => m.text)).toEqual(parts);
    expect(wa.callsOf('messages')).toHaveLength(2);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
