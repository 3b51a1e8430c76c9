/** A plugin's hook, command or tool that threw: what the log line and the metric name. */
export interface PluginFailure {
  /** The plugin's name (its definition's `name`). */
  plugin: string;
  /** The folder as configured. */
  source: string;
  kind: 'hook' | 'command' | 'tool';
  /** The hook's, command's or tool's name. */
  name: string;
  /** The hook's phase; `command` or `tool` for those. */
  phase: string;
  /** The agent whose turn it was; none for message hooks, which run for the whole daemon. */
  agent?: string;
  err: unknown;
}
