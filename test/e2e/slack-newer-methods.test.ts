import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeSlack } from '../fakes/slack/server.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon } from '../helpers/fixtures.js';
import { slackChannel, slackEnv, withSlack } from '../helpers/platforms.js';
import { echoAgent } from '../helpers/toml.js';

const QUESTIONS = ['first question here', 'second question here', 'third question here', 'fourth question here'];
const PROXY_PAGE = '<html><body>502 Bad Gateway</body></html>';

/** Mentions the bot with each question in turn (each its own thread) and waits for its answer. */
async function askAll(sl: FakeSlack): Promise<void> {
  for (const q of QUESTIONS) {
    sl.push(sl.mentionEvent(q));
    await waitFor(() => sl.texts('C0CHAN001').includes(q), 15_000);
  }
}

/** Slack-compatible APIs without the newer ways to send: every answer still arrives, once. */
describe('Slack: an API that fails markdown_text or native streams', () => {
  let sl: FakeSlack;
  beforeEach(async () => {
    sl = await withSlack();
  });

  it('markdown_text answered with HTTP 502 and a proxy page: each answer arrives once as mrkdwn, and markdown_text goes off after three failures', async () => {
    sl.markdownText = true;
    sl.markdownTextAnswer = { status: 502, raw: PROXY_PAGE };
    const d = await withChannelDaemon(echoAgent(30) + slackChannel(sl, 'native_stream = false\n'), slackEnv(sl));
    await askAll(sl);
    expect(sl.texts('C0CHAN001')).toEqual(QUESTIONS);
    expect(sl.messages.every((m) => !m.markdown)).toBe(true);
    const withMarkdown = sl.calls.filter((c) => c.args.markdown_text !== undefined);
    expect(withMarkdown).toHaveLength(3);
    expect(d.logs.text.split('this Slack API keeps failing markdown_text').length - 1).toBe(1);
  });

  it('chat.startStream answered with HTTP 502 and a proxy page: answers arrive once, and native streams go off after three failures', async () => {
    sl.markdownText = true;
    sl.fail('chat.startStream', { status: 502, raw: PROXY_PAGE }, 100);
    const d = await withChannelDaemon(echoAgent(30) + slackChannel(sl), slackEnv(sl));
    await askAll(sl);
    expect(sl.texts('C0CHAN001')).toEqual(QUESTIONS);
    expect(sl.callsOf('chat.startStream')).toHaveLength(3);
    expect(d.logs.text.split('this Slack API fails native streams').length - 1).toBe(1);
  });
});
