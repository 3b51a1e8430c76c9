import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Addresses a download may not be sent to unless it started there: loopback, link-local,
 * private and other non-public ranges (the daemon's own management API lives on loopback).
 */
const local = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
] as const)
  local.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
] as const)
  local.addSubnet(net, prefix, 'ipv6');

/** Whether an IP address is loopback, link-local, private or otherwise not public. */
export function isLocalAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (mapped) return isLocalAddress(mapped);
  const family = isIP(address);
  if (family === 0) return false;
  return local.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** The addresses a URL's host stands for (an IP literal is itself). */
export async function addressesOf(hostname: string): Promise<string[]> {
  const bare = hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(bare)) return [bare];
  return (await lookup(bare, { all: true })).map((a) => a.address);
}
