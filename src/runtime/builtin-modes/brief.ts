import type { AgentMode } from '../../contracts/modes.js';

/** Short answers: for chats read on a phone, or agents whose model rambles. */
export const briefMode: AgentMode = {
  name: 'brief',
  description: 'short answers: a few sentences, no preamble',
  setup(api) {
    api.prompt({
      name: 'brief_answers',
      // After the system prompt and the conversation context, so it is the last word on length.
      priority: 90,
      contribute: () =>
        'Keep answers brief: a few sentences or a short list, with no preamble and no closing summary. Go into detail only when the user asks for it.',
    });
  },
};
