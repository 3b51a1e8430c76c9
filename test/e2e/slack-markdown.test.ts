import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeSlack } from '../fakes/slack/server.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon } from '../helpers/fixtures.js';
import { slackChannel, slackEnv, withSlack } from '../helpers/platforms.js';
import { echoAgent } from '../helpers/toml.js';

/** Slack: model Markdown as markdown_text where the API takes it, mrkdwn otherwise; mentions escaped on both. */
describe('Slack markdown_text', () => {
  let sl: FakeSlack;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    sl = await withSlack();
  });

  const start = async () => {
    d = await withChannelDaemon(echoAgent(30) + slackChannel(sl, 'native_stream = false\n'), slackEnv(sl));
  };
  const answer = '## Plan **bold** | a | b | <!channel> and @here, `<!here>` kept in code';

  it('where Slack takes markdown_text, the draft and the final text go as standard Markdown, mentions escaped', async () => {
    sl.markdownText = true;
    await start();
    sl.push(sl.mentionEvent(answer));
    await waitFor(() => sl.messages.length === 1 && sl.messages[0]!.text.includes('kept in code'), 10_000);
    const [msg] = sl.messages;
    expect(msg).toMatchObject({ markdown: true });
    expect(msg!.text).toBe('## Plan **bold** | a | b | &lt;!channel&gt; and @\u2060here, `<!here>` kept in code');
    expect(sl.callsOf('chat.postMessage').every((c) => c.args.markdown_text && !c.args.text)).toBe(true);
    expect(sl.callsOf('chat.update').every((c) => c.args.markdown_text && !c.args.text)).toBe(true);
  });

  it('where Slack refuses markdown_text, mrkdwn goes instead and the refusal is remembered; mentions escaped there too', async () => {
    await start();
    sl.push(sl.mentionEvent(answer));
    await waitFor(() => sl.messages.length === 1 && sl.messages[0]!.text.includes('kept in code'), 10_000);
    sl.push(sl.mentionEvent('second one'));
    await waitFor(() => sl.messages.length === 2 && sl.messages[1]!.text === 'second one', 10_000);
    expect(sl.messages.every((m) => !m.markdown)).toBe(true);
    expect(sl.messages[0]!.text).toContain('&lt;!channel&gt;');
    expect(sl.messages[0]!.text).not.toContain('<!');
    expect(sl.callsOf('chat.postMessage').filter((c) => c.args.markdown_text)).toHaveLength(1);
    expect(d!.logs.text).toContain('Slack refused markdown_text');
  });
});
