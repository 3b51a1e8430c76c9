import type { AgentConfig } from '../config/schema.js';
import { CodedError, errorMessage } from '../contracts/errors.js';
import type { Runtime } from '../runtime/runtime.js';
import { raceAbort } from '../util/abortable.js';
import { addressesOf, isLocalAddress } from '../util/address-policy.js';
import { fetchLimited } from '../util/download.js';

/** Whether bytes look like an HTML document rather than plain text. */
export function looksLikeHtml(text: string): boolean {
  return /^\s*(<!doctype html|<html|<head|<body|<!--)|<(html|body|p|div|title)[\s>]/i.test(text.slice(0, 2048));
}

/**
 * The page reader (Readability over linkedom) is loaded with the first HTML page read, not at
 * start-up: importing it costs about 130 ms of CPU, and most daemons never read a link.
 */
let pageReader: Promise<typeof import('./read-page.js')> | undefined;

/** Links of one message read; more are left as they are. */
export const MAX_LINKS = 3;
/** Bytes of one page downloaded (and no more than [limits] max_attachment_bytes). */
export const LINK_MAX_BYTES = 2 * 1024 * 1024;
/** Characters of one page's text the model gets. */
export const LINK_TEXT_CHARS = 8_000;

/**
 * Which addresses count as local. Tests in this process stand in a public address (there is
 * no public host offline); the daemon never changes it.
 */
export const linkAddressPolicy: { isLocal: (address: string) => boolean } = { isLocal: isLocalAddress };

const URL_IN_TEXT = /\bhttps?:\/\/[^\s<>"'`]+/gi;

/** The distinct http(s) URLs of a text, in order, without the punctuation that ends a sentence. */
export function linksIn(text: string, max = MAX_LINKS): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(URL_IN_TEXT)) {
    let url = m[0].replace(/[.,;:!?]+$/, '');
    // A closing bracket belongs to the URL only when it opened one inside it (Wikipedia's "(disambiguation)").
    while (/[)\]}>]$/.test(url) && (url.match(/[([{<]/g)?.length ?? 0) < (url.match(/[)\]}>]/g)?.length ?? 0)) url = url.slice(0, -1);
    if (!URL.canParse(url) || out.includes(url)) continue;
    out.push(url);
    if (out.length >= max) break;
  }
  return out;
}

export interface LinkDeps {
  agent: () => AgentConfig;
  maxBytes: () => number;
  /** How long reading one link may take in all. */
  timeoutMs: () => number;
  onError?: (url: string, err: unknown) => void;
}

async function readLink(url: string, maxBytes: number, signal: AbortSignal): Promise<{ title: string | undefined; text: string }> {
  const { isLocal } = linkAddressPolicy;
  // fetchLimited lets a download start at a local address (a platform on the same host); a user's link may not.
  const host = new URL(url).hostname;
  if ((await addressesOf(host)).some(isLocal)) throw new CodedError('LINK_REFUSED', `${url} points to a local or private address`);
  const bytes = await fetchLimited(url, { maxBytes, signal, name: url, isLocal });
  const raw = new TextDecoder('utf-8').decode(bytes);
  if (raw.includes('\u0000')) throw new CodedError('LINK_NOT_PAGE', url);
  if (!looksLikeHtml(raw)) return { title: undefined, text: raw.trim() };
  // A failed load is not kept: the next page tries again.
  pageReader ??= import('./read-page.js').catch((err: unknown) => {
    pageReader = undefined;
    throw err;
  });
  const { readablePage } = await pageReader;
  return readablePage(raw);
}

/** Why a link was not read, in words for the user and the model (the download's codes speak of attachments). */
function reasonOf(url: string, err: unknown, o: { timeoutMs: number; maxBytes: number }): string {
  const code = err instanceof CodedError ? err.code : undefined;
  if (code === 'ATTACHMENT_TIMEOUT' || (err instanceof DOMException && err.name === 'TimeoutError')) return `it took longer than ${o.timeoutMs} ms`;
  if (code === 'ATTACHMENT_TOO_LARGE') return `it is larger than ${o.maxBytes} bytes`;
  if (code === 'LINK_REFUSED') return 'it points to a local or private address';
  if (code === 'LINK_NOT_PAGE') return 'it is not a web page or text';
  // ATTACHMENT_UNAVAILABLE and network errors: the detail (an HTTP status, a refused redirect) without the catalogue text.
  return errorMessage(err)
    .replace(/ \([^()]*\)$/, '')
    .replace(`${url}: `, '');
}

function attr(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

/**
 * `[agent] read_links`: after the input is built (post_agent_build), the first MAX_LINKS
 * http(s) URLs of the user's message are fetched together, each within
 * `[limits] attachment_timeout_ms` and LINK_MAX_BYTES, with the attachments' redirect rules
 * and never to a loopback or private address; each page's readable text is added to the
 * user's message as `<link url="..." title="...">` context. A link that could not be read
 * is named to the model with the reason and told to the user in a one-line note.
 */
export function registerLinks(runtime: Runtime, deps: LinkDeps): void {
  runtime.hooks.register({
    phase: 'post_agent_build',
    name: 'links',
    // Synchronous for a message without links (most): an async hook makes the rest of its phase wait.
    run: (ctx) => {
      const input = ctx.input;
      if (!input || !deps.agent().read_links) return;
      const urls = linksIn(ctx.message.text);
      if (!urls.length) return;
      return (async () => {
        const maxBytes = Math.min(LINK_MAX_BYTES, deps.maxBytes());
        const timeoutMs = deps.timeoutMs();
        const read = await Promise.allSettled(
          urls.map((url) => {
            const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(timeoutMs)]);
            // The host lookup takes no signal: the race keeps a hung resolver from holding the turn.
            return raceAbort(readLink(url, maxBytes, signal), signal);
          }),
        );
        if (ctx.signal.aborted) throw ctx.signal.reason;
        const parts: string[] = [];
        const notes: string[] = [];
        read.forEach((r, i) => {
          const url = urls[i]!;
          if (r.status === 'rejected') {
            const why = reasonOf(url, r.reason, { timeoutMs, maxBytes });
            deps.onError?.(url, r.reason);
            parts.push(`[link ${url} not read: ${why}]`);
            notes.push(`I could not read ${url}: ${why}.`);
            return;
          }
          const { title, text } = r.value;
          const kept = text.slice(0, LINK_TEXT_CHARS);
          const cut = kept.length < text.length ? `\n[cut: ${text.length - kept.length} more characters]` : '';
          parts.push(`<link url="${attr(url)}"${title ? ` title="${attr(title)}"` : ''}>\n${kept}${cut}\n</link>`);
        });
        input.text = [input.text, 'Pages the user linked to, as fetched just now:', ...parts].filter(Boolean).join('\n\n');
        for (const note of notes) ctx.emit({ type: 'text_delta', text: `ℹ️ ${note}\n\n` });
      })();
    },
  });
}
