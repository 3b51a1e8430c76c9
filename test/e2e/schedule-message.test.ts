import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm, withTempDir } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { llmAgent } from '../helpers/toml.js';

const ADA = { id: 52, first_name: 'Ada' };

interface Status {
  reminders?: { pending: number; next_fire_at: string | null };
}

describe('the schedule_message tool, daemon as a real process', () => {
  it('the model schedules a reminder in the conversation: bounded, listed, shown in /status, posted once at its time', async () => {
    const tg = await withTelegram();
    const llm = await withLlm();
    const file = writeProcessConfig(withTempDir('schedule-message'), llmAgent(llm.url) + telegramChannel(tg));
    const p = withDaemonProcess(file, telegramEnv(tg));
    const url = await p.url();
    const status = async () => (await (await fetch(`${url}/status`)).json()) as Status;
    const call = (id: string, args: object) => ({
      kind: 'stream' as const,
      chunks: [{ toolCalls: [{ id, name: 'schedule_message', arguments: JSON.stringify(args) }] }],
    });

    // Too far ahead: refused with the /remind bounds, nothing stored.
    llm.script(call('c0', { when: 'in 400d', text: 'renew the passport' }), { kind: 'stream', chunks: [{ content: 'I could not.' }] });
    tg.dm('remind me to renew my passport in 400 days', ADA);
    await waitFor(() => tg.texts(ADA.id).includes('I could not.'), 15_000);
    expect(JSON.stringify(llm.requests[1]!.body.messages)).toContain('Not scheduled: A reminder can be set at most a year ahead.');
    expect((await status()).reminders).toEqual({ pending: 0, next_fire_at: null });

    llm.script(call('c1', { when: 'in 4s', text: 'drink some water' }), { kind: 'stream', chunks: [{ content: 'Scheduled.' }] });
    tg.dm('remind me to drink water in a few seconds', ADA);
    await waitFor(() => tg.texts(ADA.id).includes('Scheduled.'), 15_000);
    expect(JSON.stringify(llm.requests[3]!.body.messages)).toMatch(/Scheduled as reminder 1 for \d{4}-/);
    const pending = await status();
    expect(pending.reminders?.pending).toBe(1);
    expect(Date.parse(pending.reminders!.next_fire_at!)).toBeGreaterThan(Date.now() - 4000);
    tg.dm('/reminders', ADA);
    await waitFor(() => tg.texts(ADA.id).some((t) => /^1 · .+ · drink some water$/.test(t)), 15_000);

    await waitFor(() => tg.texts(ADA.id).includes('⏰ @Ada: drink some water'), 20_000);
    await waitFor(async () => (await status()).reminders?.pending === 0, 15_000);
    // A round trip after the firing: the reminder was posted once, and its firing counted.
    tg.dm('/reminders', ADA);
    await waitFor(() => tg.texts(ADA.id).includes('No reminders in this conversation.'), 15_000);
    expect(tg.texts(ADA.id).filter((t) => t.startsWith('⏰'))).toHaveLength(1);
    expect(await (await fetch(`${url}/metrics`)).text()).toMatch(/^channeld_firings_total\{source="reminder",outcome="fired"\} 1$/m);
    expect(llm.requests).toHaveLength(4);
    p.signal('SIGTERM');
    expect(await p.exited).toBe(0);
  });
});

describe('the schedule_message tool in a scheduled turn, in-process daemon', () => {
  it('the reminder fires into the chat past allow_from, as the schedule did: posted, no "not allowed" notice, counted fired', async () => {
    const tg = await withTelegram();
    const llm = await withLlm();
    // Only Ada may talk to the bot: the schedule's turn, and what it sets, come from no one on the list.
    const body = llmAgent(llm.url) + telegramChannel(tg).replace('allow_from = ["*"]', `allow_from = ["${ADA.id}"]`);
    const d = await withChannelDaemon(body, telegramEnv(tg));
    // Added by reload once the channel runs: one firing a few seconds ahead (a yearly pattern in
    // UTC), which catch_up = "last" runs even if a loaded box applies the reload after it.
    const at = new Date(Date.now() + 3000);
    const cron = `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} ${at.getUTCDate()} ${at.getUTCMonth() + 1} *`;
    d.rewrite(
      `${body}\n[[schedules]]\nid = "plants"\nchannel = "tg"\nchat = "${ADA.id}"\ncron = "${cron}"\ntimezone = "UTC"\nprompt = "plan the watering"\ncatch_up = "last"\n`,
    );
    llm.script(
      {
        kind: 'stream',
        chunks: [{ toolCalls: [{ id: 'c1', name: 'schedule_message', arguments: JSON.stringify({ when: 'in 2s', text: 'water the plants' }) }] }],
      },
      { kind: 'stream', chunks: [{ content: 'Watering in a moment.' }] },
    );
    expect(await d.daemon.reload()).toMatchObject({ ok: true });
    await waitFor(() => tg.texts(ADA.id).includes('Watering in a moment.'), 20_000);
    expect(JSON.stringify(llm.requests[1]!.body.messages)).toMatch(/Scheduled as reminder 1 for /);
    // At its time: the reminder, not "You are not allowed to talk to this bot. Your id is schedule:plants…".
    const firing = () => tg.texts(ADA.id).filter((t) => t.startsWith('⏰') || /not allowed/.test(t));
    await waitFor(() => firing().length > 0, 20_000);
    expect(firing()).toEqual(['⏰ water the plants']);
    const metrics = async () => (await fetch(`${d.url}/metrics`)).text();
    await waitFor(async () => /^channeld_firings_total\{source="reminder",outcome="fired"\} 1$/m.test(await metrics()), 10_000);
    expect(await metrics()).not.toMatch(/channeld_firings_total\{source="reminder",outcome="skipped"\}/);
    expect(llm.requests).toHaveLength(2);
  });
});
