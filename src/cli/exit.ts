import { CodedError, ConfigError, errorMessage, operatorProblem } from '../contracts/errors.js';

/** sysexits.h EX_CONFIG: systemd's RestartPreventExitStatus=78 stops a restart loop on it. */
export const EX_CONFIG = 78;

/** 78 when the operator must fix something first (config, listen, state_dir, database), 1 otherwise. */
export function exitCodeFor(err: unknown): number {
  return operatorProblem(err) ? EX_CONFIG : 1;
}

/** Prints why the command failed: a config's problems one per line, else the root problem's message. */
export function reportStartFailure(err: unknown): void {
  if (err instanceof ConfigError) {
    console.error(err.problems.join('\n'));
    return;
  }
  const root = operatorProblem(err);
  if (root instanceof ConfigError) console.error(root.problems.join('\n'));
  else if (root) console.error(`channeld: ${root.message}`);
  else console.error(`channeld: ${errorMessage(err)}${err instanceof CodedError ? ` [${err.code}]` : ''}`);
}
