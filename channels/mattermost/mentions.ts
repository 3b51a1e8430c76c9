import { mapProse } from '../../src/util/chunk.js';

/**
 * `@channel`, `@all` and `@here` notify everyone in a Mattermost channel. Model output must
 * never do that: a word joiner after the "@" keeps the word as written but breaks the
 * mention. Code is kept as written (Mattermost reads no mentions there).
 */
export function neutralizeMattermostMentions(md: string): string {
  return mapProse(md, (prose) => prose.replace(/@(channel|all|here)\b/gi, '@\u2060$1'));
}
