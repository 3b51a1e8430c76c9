import { isIPv4, isIPv6 } from 'node:net';

/** A DNS name: dot-separated labels of letters, digits and inner hyphens, not all digits at the end. */
const hostname = /^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/**
 * What is wrong with an `[http] listen` value that is already shaped "host:port", or
 * undefined. Catches what `check` can know without binding: a port out of range, an IP
 * literal that does not parse (999.1.1.1), a host that is no valid name.
 */
export function listenProblem(listen: string): string | undefined {
  const i = listen.lastIndexOf(':');
  const rawHost = listen.slice(0, i);
  const port = Number(listen.slice(i + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) return `port ${listen.slice(i + 1)} is out of range: use 1-65535 (or 0 for any free port)`;
  if (rawHost.startsWith('[')) {
    const host = rawHost.slice(1, -1);
    return isIPv6(host) ? undefined : `"${host}" is not an IPv6 address`;
  }
  if (/^[\d.]+$/.test(rawHost)) return isIPv4(rawHost) ? undefined : `"${rawHost}" is not an IPv4 address`;
  return hostname.test(rawHost) ? undefined : `"${rawHost}" is not a host name or IP address`;
}
