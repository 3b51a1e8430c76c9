/**
 * Messages that carry neither text nor a file but something a person can read: a shared
 * location, shared contact cards. They reach the agent as one short, plain text each.
 */

/** `messages[].location` (Meta's location messages webhook); coordinates in decimal degrees. */
export interface WaLocation {
  latitude?: number | string;
  longitude?: number | string;
  name?: string;
  address?: string;
  url?: string;
}

/** One card of `messages[].contacts` (contacts messages webhook); any part may be left out. */
export interface WaSharedContact {
  name?: { formatted_name?: string; first_name?: string; last_name?: string };
  phones?: Array<{ phone?: string; wa_id?: string; type?: string }>;
}

/** A name or address the user typed: kept to this, on one line. */
const FIELD_MAX_CHARS = 200;
const PHONE_MAX_CHARS = 40;
/** A message may carry up to 257 cards; the agent gets the first of them. */
export const MAX_SHARED_CONTACTS = 10;
const MAX_PHONES_PER_CONTACT = 3;

function field(v: unknown, maxChars = FIELD_MAX_CHARS): string {
  if (typeof v !== 'string') return '';
  const s = v.replace(/\s+/g, ' ').trim();
  return s.length <= maxChars ? s : `${s.slice(0, maxChars - 1)}…`;
}

function degrees(v: unknown): number | undefined {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN;
  return Number.isFinite(n) ? n : undefined;
}

/** `📍 Location: <name>, <address> (<lat>, <lon>)`, each part only when sent; undefined when none is. */
export function locationText(l: WaLocation | undefined): string | undefined {
  if (!l || typeof l !== 'object') return undefined;
  const lat = degrees(l.latitude);
  const lon = degrees(l.longitude);
  const place = [field(l.name), field(l.address)].filter(Boolean).join(', ');
  const at = lat !== undefined && lon !== undefined ? `(${lat}, ${lon})` : '';
  return place || at ? `📍 Location: ${[place, at].filter(Boolean).join(' ')}` : undefined;
}

/**
 * `📇 Contact: <name> (<phone>, <phone>)`, a line per card: at most MAX_SHARED_CONTACTS cards
 * (then a line saying how many more) and MAX_PHONES_PER_CONTACT numbers each, every field cut
 * to length. Undefined for no cards.
 */
export function contactsText(cards: WaSharedContact[] | undefined): string | undefined {
  if (!Array.isArray(cards) || cards.length === 0) return undefined;
  const lines = cards.slice(0, MAX_SHARED_CONTACTS).map((c) => {
    const name = field(c?.name?.formatted_name) || field([c?.name?.first_name, c?.name?.last_name].filter((s) => typeof s === 'string').join(' ')) || 'no name';
    const all = (Array.isArray(c?.phones) ? c.phones : []).map((p) => field(p?.phone ?? p?.wa_id, PHONE_MAX_CHARS)).filter(Boolean);
    const phones = all.slice(0, MAX_PHONES_PER_CONTACT).join(', ') + (all.length > MAX_PHONES_PER_CONTACT ? ', …' : '');
    return `📇 Contact: ${name}${phones ? ` (${phones})` : ''}`;
  });
  if (cards.length > MAX_SHARED_CONTACTS) lines.push(`… and ${cards.length - MAX_SHARED_CONTACTS} more contacts`);
  return lines.join('\n');
}
