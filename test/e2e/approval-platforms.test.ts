import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import { signSlack } from '../fakes/slack/server.js';
import { say, toolResult, withCountingFile, type CountingFile } from '../helpers/approval.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withChat, withLlm } from '../helpers/fixtures.js';
import { firstMcpConnected } from '../helpers/mcp.js';
import { discordChannel, discordEnv, slackChannel, slackEnv, slackHttpChannel, withDiscord, withSlack } from '../helpers/platforms.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';

describe('approval buttons on Discord, Slack and the web chat (real server-filesystem)', () => {
  let llm: FakeLlm;
  let file: CountingFile;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    llm = await withLlm();
    file = withCountingFile();
  });

  const start = async (channel: string, env: NodeJS.ProcessEnv) => {
    d = await withChannelDaemon(llmAgent(llm.url) + file.server() + channel, env);
    await firstMcpConnected(d);
  };

  it('Discord: components on the question, INTERACTION_CREATE clicks acknowledged; only the starter decides', async () => {
    const dc = await withDiscord();
    await start(discordChannel(dc), discordEnv(dc));
    await waitFor(() => dc.connected, 10_000);
    llm.script(file.edit(), say('Edited on Discord.'));
    dc.guildMessage('edit the count', { mention: true, author: { id: '111111111111111111', username: 'bob' } });
    const q = await waitFor(() => dc.messages.find((m) => m.components), 20_000);
    expect(q.content).toContain('fs__edit_file {"path":');
    expect(q.components![0]!.components.map((b) => [b.label, b.style])).toEqual([
      ['Approve', 1],
      ['Deny', 4],
    ]);

    dc.click(q, 'Approve', { id: '222222222222222222', username: 'eve' });
    await waitFor(() => dc.texts(dc.guild.channel).includes('Only the person who asked, or an approver, can decide this.'), 10_000);
    expect(file.runs).toBe(0);

    dc.click(q, 'Approve', { id: '111111111111111111', username: 'bob' });
    await waitFor(() => dc.texts(dc.guild.channel).includes('Edited on Discord.'), 20_000);
    expect(file.runs).toBe(1);
    expect(q.content).toBe('✅ fs__edit_file: approved.');
    expect(q.components).toBeUndefined();
    // Both interactions got their callback (DEFERRED_UPDATE_MESSAGE) within Discord's window.
    await waitFor(() => dc.interactionCallbacks.length === 2);
    expect(dc.interactionCallbacks.map((c) => c.type)).toEqual([6, 6]);
  });

  it('Slack: Block Kit buttons, block_actions over Socket Mode acked; Deny refuses the call', async () => {
    const sl = await withSlack();
    await start(slackChannel(sl, 'native_stream = false\n'), slackEnv(sl));
    llm.script(file.edit(), say('Not edited.'), file.edit('call_2'), say('Edited on Slack.'));
    sl.push(sl.dmEvent('edit the count'));
    const q = await waitFor(() => sl.messages.find((m) => m.blocks?.some((b) => b.type === 'actions')), 20_000);
    expect(q.text).toContain('fs__edit_file');
    const envelope = sl.click(q, 'Deny');
    await waitFor(() => sl.texts('D0DM0001').includes('Not edited.'), 20_000);
    expect(sl.acks.has(envelope)).toBe(true);
    expect(q.text).toBe('❌ fs__edit_file: denied.');
    expect(q.blocks!.some((b) => b.type === 'actions')).toBe(false);
    expect(toolResult(llm, 1)).toContain('the user denied this tool call');
    expect(file.runs).toBe(0);

    sl.push(sl.dmEvent('now really edit it'));
    const q2 = await waitFor(() => sl.messages.find((m) => m !== q && m.blocks?.some((b) => b.type === 'actions')), 20_000);
    sl.click(q2, 'Approve');
    await waitFor(() => sl.texts('D0DM0001').includes('Edited on Slack.'), 20_000);
    expect(file.runs).toBe(1);
  });

  it('Slack in HTTP mode: a signed, form-encoded block_actions payload approves the call', async () => {
    const sl = await withSlack();
    const secret = 'signing-secret-123';
    await start(slackHttpChannel(sl, 'native_stream = false\n'), slackEnv(sl, secret));
    const post = (body: string, contentType: string) =>
      fetch(`${d!.url}/webhooks/sl`, { method: 'POST', headers: { ...signSlack(body, secret), 'content-type': contentType }, body });
    llm.script(file.edit(), say('Edited over HTTP.'));
    expect((await post(JSON.stringify(sl.callback(sl.dmEvent('edit the count'))), 'application/json')).status).toBe(200);
    const q = await waitFor(() => sl.messages.find((m) => m.blocks?.some((b) => b.type === 'actions')), 20_000);
    const res = await post(`payload=${encodeURIComponent(JSON.stringify(sl.blockActions(q, 'Approve')))}`, 'application/x-www-form-urlencoded');
    expect(res.status).toBe(200);
    await waitFor(() => sl.texts('D0DM0001').includes('Edited over HTTP.'), 20_000);
    expect(file.runs).toBe(1);
  });

  it('web chat: buttons on the question; a click approves; another tab cannot decide', async () => {
    await start(webchatChannel(), {});
    const [me, other] = await Promise.all([withChat(d!, 'tab-me'), withChat(d!, 'tab-other')]);
    llm.script(file.edit(), say('Edited in the web chat.'));
    me.send('edit the count');
    const q = await waitFor(() => me.replies().find((f) => f.buttons), 20_000);
    expect(q.buttons!.map((b) => b.label)).toEqual(['Approve', 'Deny']);
    other.send(q.buttons![0]!.data);
    await waitFor(() => other.replies().some((f) => f.text === 'Only the person who asked, or an approver, can decide this.'), 10_000);
    expect(file.runs).toBe(0);

    // The page sends a button's data as the tab's message.
    me.send(q.buttons![0]!.data);
    await waitFor(() => me.replies().some((f) => f.text === 'Edited in the web chat.' && f.final), 20_000);
    expect(file.runs).toBe(1);
    const latest = me
      .replies()
      .filter((f) => f.ref === q.ref)
      .at(-1)!;
    expect(latest).toMatchObject({ text: '✅ fs__edit_file: approved.', final: true });
    expect(latest.buttons).toBeUndefined();
  });
});
