import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import { REPEATING_NOTE, RepetitionGuardedRunner } from '../../../src/agent/repetition.js';
import type { AgentRunner } from '../../../src/contracts/agent-runner.js';
import { STOP_MARKER } from '../../../src/stream/reply-stream.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

/** A model that writes `text` in small pieces, as a streaming model does; counts what it was asked to write. */
class TextRunner implements AgentRunner {
  readonly name = 'script';
  written = 0;
  constructor(
    private readonly text: string,
    private readonly pieceChars = 7,
  ) {}
  async *run(_i: unknown, _c: unknown, signal: AbortSignal): AsyncIterable<AgentEvent> {
    for (let i = 0; i < this.text.length; i += this.pieceChars) {
      if (signal.aborted) return yield { type: 'cancelled' };
      const piece = this.text.slice(i, i + this.pieceChars);
      this.written += piece.length;
      yield { type: 'text_delta', text: piece };
    }
    yield { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } };
  }
}

async function run(text: string): Promise<{ events: AgentEvent[]; shown: string }> {
  const events: AgentEvent[] = [];
  const signal = new AbortController().signal;
  for await (const e of new RepetitionGuardedRunner(new TextRunner(text)).run(
    { system: '', history: [], text: 'x' },
    { scope: 's', channelId: 'c', signal },
    signal,
  ))
    events.push(e);
  return { events, shown: events.flatMap((e) => (e.type === 'text_delta' ? [e.text] : [])).join('') };
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
const PROSE =
  'Here is what I found after looking at the logs you sent. The daemon restarted twice, once at 09:12 and once at 09:40, both times after the disk filled up. Below are the details.\n\n';

/** Answers users ask for that repeat a lot, legitimately. */
const legitimate: Record<string, string> = {
  'a 7,000-character answer whose paragraphs say "lorem ipsum dolor sit amet" twelve times': range(21)
    .map((i) => `Paragraph ${i}: ${'lorem ipsum dolor sit amet '.repeat(12).trim()}.\n\n`)
    .join(''),
  'separator lines': `${range(12)
    .map((i) => `${'─'.repeat(60)}\nSection ${i}\n${'='.repeat(60)}\nSome text about section ${i}.\n`)
    .join('')}${'='.repeat(60)}\n${'='.repeat(60)}\n${'-'.repeat(60)}\n`,
  'a long Markdown table': `| # | item | price | in stock |\n|---|------|-------|----------|\n${range(300)
    .map((i) => `| ${i} | item ${i} | ${(i * 1.5).toFixed(2)} | ${i % 2 ? 'yes' : 'no'} |`)
    .join('\n')}\n`,
  'a table template of empty rows': `| name | date | amount |\n|------|------|--------|\n${'|      |      |        |\n'.repeat(50)}`,
  CSV: `id,user,group,date\n${range(400)
    .map((i) => `${i},user${i},${i % 7},2024-01-${String((i % 28) + 1).padStart(2, '0')}`)
    .join('\n')}\n`,
  'a code listing of similar lines': `switch (code) {\n${range(150)
    .map((i) => `  case ${i}: return handler${i}(input);`)
    .join('\n')}\n}\n`,
  'a phrase said twelve times': `${'All work and no play makes Jack a dull boy. '.repeat(12)}\n`,
};

describe('the repetition guard lets legitimate repetitive answers through untouched', () => {
  for (const [what, text] of Object.entries(legitimate)) {
    it(what, async () => {
      const { events, shown } = await run(text);
      expect(events.at(-1)!.type).toBe('done');
      expect(shown).toBe(text);
    });
  }
});

/** Models stuck in a loop, after a sensible start. */
const loops: Record<string, string> = {
  'a sentence': 'I will now answer the question. ',
  'one word': 'the ',
  'a line of code': 'print("hello world")\n',
  'a table row': '| 1 | foo | bar |\n',
  'a paragraph':
    'The configuration file is read once at start-up and again on every reload signal; each channel is compared by its id, so unchanged channels keep their connections while changed ones restart and removed ones stop. Running turns are given the grace period to finish before they are cancelled with a visible marker.\n\n',
  'a long unit of 390 characters': `${'Step: check the disk, then check the lock holder, then the log. '.repeat(6)}Again.\n`,
  'separator characters forever': '=',
};

describe('the repetition guard catches real loops within 2,000 characters, and history keeps text only up to where the loop began', () => {
  for (const [what, unit] of Object.entries(loops)) {
    it(what, async () => {
      const text = PROSE + unit.repeat(Math.ceil(8000 / unit.length));
      const { events, shown } = await run(text);
      const end = events.at(-1)!;
      expect(end).toMatchObject({ type: 'error', code: 'ANSWER_REPEATING', message: REPEATING_NOTE });
      const keep = (end as { keepChars: number }).keepChars;
      // The user saw what arrived, and it stopped within 2,000 characters of the loop's start.
      expect(text.startsWith(shown)).toBe(true);
      expect(shown.length - PROSE.length).toBeLessThanOrEqual(2000);
      // History keeps the text before the loop and one copy of what repeated, no more.
      expect(keep).toBeGreaterThanOrEqual(PROSE.length);
      expect(keep).toBeLessThanOrEqual(PROSE.length + unit.length);
      expect(text.slice(0, keep).startsWith(PROSE)).toBe(true);
    });
  }
});

describe('the guard wraps every runner of a workspace', () => {
  it('a looping runner: the user sees what arrived plus the note; the session stores the text cut where the loop began', async () => {
    const unit = 'I will now answer the question. ';
    const runner = new TextRunner(PROSE + unit.repeat(300));
    const p = pipeline('', '', { workspace: { createRunner: () => runner } });
    await p.dispatcher.deliver(userMessage('t', 'hi'));
    await waitFor(() => (p.db.prepare('SELECT state FROM inbox').get() as { state: string } | undefined)?.state === 'failed', 5000);
    const [visible] = p.adapter.visible('chat-1');
    expect(visible!.endsWith(`⚠️ ${REPEATING_NOTE}`)).toBe(true);
    expect(visible).not.toContain(STOP_MARKER);
    expect(runner.written).toBeLessThan(PROSE.length + 2100);
    const session = p.sessions.active('default', 't:chat-1');
    const [stored] = p.sessions.recent(session.id, 1);
    expect(stored).toMatchObject({ ending: 'error' });
    expect(stored!.assistantText.startsWith(PROSE)).toBe(true);
    expect(stored!.assistantText.length).toBeLessThanOrEqual(PROSE.length + unit.length);
    await p.close();
  });
});

describe('the guard passes the runner on as an iterator of its own', () => {
  const input = { system: '', history: [], text: 'x' };
  /** Yields `texts`, then done; records whether its finally ran. */
  function closable(texts: string[], fail?: Error) {
    const state = { closed: false };
    const runner: AgentRunner = {
      name: 'closable',
      async *run() {
        try {
          for (const text of texts) yield { type: 'text_delta', text };
          if (fail) throw fail;
          yield { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } };
        } finally {
          state.closed = true;
        }
      },
    };
    return { runner, state };
  }

  it('a consumer that stops early closes the runner; the guard never listens to the turn itself', async () => {
    const { runner, state } = closable(['a', 'b', 'c']);
    const turn = new AbortController();
    const seen: AgentEvent[] = [];
    for await (const e of new RepetitionGuardedRunner(runner).run(input, { scope: 's', channelId: 'c', signal: turn.signal }, turn.signal)) {
      seen.push(e);
      expect(getEventListeners(turn.signal, 'abort')).toHaveLength(0);
      break;
    }
    expect(seen).toEqual([{ type: 'text_delta', text: 'a' }]);
    expect(state.closed).toBe(true);
    expect(getEventListeners(turn.signal, 'abort')).toHaveLength(0);
  });

  it("the runner gets the turn's own signal, and the turn's abort reaches it", async () => {
    const turn = new AbortController();
    let given: AbortSignal | undefined;
    const runner: AgentRunner = {
      name: 'watch',
      async *run(_i, _c, signal) {
        given = signal;
        yield { type: 'text_delta', text: 'a' };
        turn.abort(new Error('stop'));
        yield signal.aborted ? { type: 'cancelled' } : { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } };
      },
    };
    const events: AgentEvent[] = [];
    for await (const e of new RepetitionGuardedRunner(runner).run(input, { scope: 's', channelId: 'c', signal: turn.signal }, turn.signal)) events.push(e);
    expect(given).toBe(turn.signal);
    expect(events.at(-1)).toEqual({ type: 'cancelled' });
  });

  it('a loop closes the runner at once, before the consumer asks for the error; its close failing reaches the consumer', async () => {
    const unit = 'I will check the logs again and report back shortly. ';
    const closed: string[] = [];
    /** Writes the same sentence forever; records its close, which fails when asked to. */
    const looping = (failOnClose: boolean): AgentRunner => ({
      name: 'looping',
      run() {
        let i = 0;
        const events: AsyncIterator<AgentEvent> = {
          next: async () => ({ value: { type: 'text_delta', text: i++ === 0 ? PROSE : unit }, done: false }),
          return: async () => {
            closed.push('closed');
            if (failOnClose) throw new Error('close failed');
            return { value: undefined, done: true };
          },
        };
        return { [Symbol.asyncIterator]: () => events };
      },
    });
    const it = new RepetitionGuardedRunner(looping(false))
      .run(input, { scope: 's', channelId: 'c', signal: new AbortController().signal }, new AbortController().signal)
      [Symbol.asyncIterator]();
    let r = await it.next();
    while (!r.done && r.value.type === 'text_delta') {
      if (closed.length) break;
      r = await it.next();
    }
    // The text that showed the loop is out, and the runner is already closed: the model stopped.
    expect(closed).toEqual(['closed']);
    r = await it.next();
    expect(r.value).toMatchObject({ type: 'error', code: 'ANSWER_REPEATING' });
    expect(await it.next()).toEqual({ value: undefined, done: true });

    const failing = new RepetitionGuardedRunner(looping(true)).run(
      input,
      { scope: 's', channelId: 'c', signal: new AbortController().signal },
      new AbortController().signal,
    );
    const seen: AgentEvent[] = [];
    await expect(
      (async () => {
        for await (const e of failing) seen.push(e);
      })(),
    ).rejects.toThrow('close failed');
    expect(seen.at(-1)).toMatchObject({ type: 'error', code: 'ANSWER_REPEATING' });
  });

  it("the runner's failure reaches the consumer, and the turn is no longer listened to", async () => {
    const { runner, state } = closable(['a'], new Error('provider down'));
    const turn = new AbortController();
    const seen: AgentEvent[] = [];
    await expect(
      (async () => {
        for await (const e of new RepetitionGuardedRunner(runner).run(input, { scope: 's', channelId: 'c', signal: turn.signal }, turn.signal)) seen.push(e);
      })(),
    ).rejects.toThrow('provider down');
    expect(seen).toHaveLength(1);
    expect(state.closed).toBe(true);
    expect(getEventListeners(turn.signal, 'abort')).toHaveLength(0);
  });

  it('a loop: the error comes right after the text that showed it, then the runner is closed and ends', async () => {
    const unit = 'I will check the logs again and report back shortly. ';
    const { runner, state } = closable([PROSE, ...Array.from({ length: 60 }, () => unit)]);
    const turn = new AbortController();
    const events: AgentEvent[] = [];
    for await (const e of new RepetitionGuardedRunner(runner).run(input, { scope: 's', channelId: 'c', signal: turn.signal }, turn.signal)) events.push(e);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'ANSWER_REPEATING' });
    expect(events.filter((e) => e.type === 'text_delta').length).toBeLessThan(60);
    expect(state.closed).toBe(true);
  });

  it('the turn aborted before the first event: the runner starts with its signal already aborted', async () => {
    const turn = new AbortController();
    turn.abort(new Error('stop'));
    let sawAborted: boolean | undefined;
    const runner: AgentRunner = {
      name: 'watch',
      async *run(_i, _c, signal) {
        sawAborted = signal.aborted;
        yield { type: 'cancelled' };
      },
    };
    const events: AgentEvent[] = [];
    for await (const e of new RepetitionGuardedRunner(runner).run(input, { scope: 's', channelId: 'c', signal: turn.signal }, turn.signal)) events.push(e);
    expect(sawAborted).toBe(true);
    expect(events).toEqual([{ type: 'cancelled' }]);
  });
});
