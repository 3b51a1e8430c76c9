/** Cuts `text` to `max` characters and says so, so the model knows it saw only a part. */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n[result cut: the tool returned ${text.length} characters; only the first ${max} are shown]`;
}

/** Whether `text` is already a cut text (ends with cutText's note), so it is not cut twice. */
export function isCutText(text: string): boolean {
  return /\n\[result cut: the tool returned \d+ characters; only the first \d+ are shown\]$/.test(text);
}
