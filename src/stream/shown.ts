import type { MessageRef } from '../contracts/message.js';

/** One message of a reply as the user sees it: its ref once sent, and the text it shows. */
export interface Shown {
  ref: MessageRef | undefined;
  text: string | undefined;
}

/** Whether `shown` is a sent message showing `chunk` already. */
export function showsChunk(shown: Shown | undefined, chunk: string): boolean {
  return Boolean(shown?.ref) && shown!.text === chunk;
}

/** The first chunk of `desired` that the messages do not show yet; -1 when every one is shown. */
export function firstUnshown(shown: readonly Shown[], desired: readonly string[]): number {
  return desired.findIndex((chunk, i) => !showsChunk(shown[i], chunk));
}

/** Whether the messages show exactly `desired`: every chunk, and no message more. */
export function showsAll(shown: readonly Shown[], desired: readonly string[]): boolean {
  return shown.length === desired.length && firstUnshown(shown, desired) < 0;
}

/**
 * The refs of the messages sent, in order. A loop, not `flatMap`: it runs twice per reply,
 * and V8's `flatMap` cost ten times as much for a one-message reply.
 */
export function sentRefs(shown: readonly Shown[]): MessageRef[] {
  const refs: MessageRef[] = [];
  for (const s of shown) if (s.ref) refs.push(s.ref);
  return refs;
}
