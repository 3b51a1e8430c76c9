/**
 * Config snippets the end-to-end tests compose a daemon config from. Each returns TOML text
 * ending in a newline, so snippets can be concatenated in any order after the header that
 * startDaemon writes.
 */

/** `[agent]` on the built-in echo provider: it answers with the message, a word every `delayMs`. */
export const echoAgent = (delayMs: number): string => `[agent]\nprovider = "echo"\necho_delay_ms = ${delayMs}\n\n`;

/** `[agent]` on an OpenAI-compatible server (the fake LLM at `url`), with `extra` keys in the table. */
export const llmAgent = (url: string, model = 'm', extra = ''): string =>
  `[agent]\nprovider = "openai-compatible"\nbase_url = "${url}"\nmodel = "${model}"\n${extra}\n`;

/** A web chat `[[channels]]` table with `extra` keys. */
export const webchatChannel = (id = 'web', extra = ''): string => `[[channels]]\nid = "${id}"\ntype = "webchat"\n${extra}`;
