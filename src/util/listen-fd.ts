/**
 * The listening socket an upgrading daemon hands its successor (`channeld upgrade`): the
 * old process passes it as an extra stdio descriptor and names it here, so the new process
 * listens on the very same socket and the port never closes. Read once and forgotten, so a
 * later child of this process does not take it for its own.
 */
export const LISTEN_FD_ENV = 'CHANNELD_LISTEN_FD';

export function takeInheritedListenFd(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env[LISTEN_FD_ENV];
  delete env[LISTEN_FD_ENV];
  const fd = Number(raw);
  return raw && Number.isInteger(fd) && fd > 2 ? fd : undefined;
}
