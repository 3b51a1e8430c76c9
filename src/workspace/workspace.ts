import { EchoRunner } from '../agent/echo.js';
import type { AgentEvent } from '../agent/events.js';
import type { AgentRunner } from '../agent/runner.js';
import type { AgentConfig } from '../config/schema.js';
import type { Logger } from '../observe/logger.js';
import { registerBuiltins } from '../runtime/builtins.js';
import { Runtime } from '../runtime/runtime.js';

/** A runner that can only report why the agent cannot run, so the user gets a readable error. */
class UnavailableRunner implements AgentRunner {
  readonly name = 'unavailable';
  constructor(private readonly reason: string) {}
  async *run(): AsyncIterable<AgentEvent> {
    yield { type: 'error', code: 'PROVIDER_UNAVAILABLE', message: this.reason };
  }
}

export interface WorkspaceOptions {
  name: string;
  config: AgentConfig;
  log: Logger;
  isRunning?: (scope: string) => boolean;
}

/** One agent: its runtime registries and its provider client. */
export class Workspace {
  readonly name: string;
  readonly config: AgentConfig;
  readonly runtime: Runtime;
  readonly #runner: AgentRunner;

  constructor(options: WorkspaceOptions) {
    this.name = options.name;
    this.config = options.config;
    this.#runner = createRunner(options.config);
    const log = options.log.child({ agent: options.name });
    this.runtime = new Runtime({
      runnerFor: () => this.#runner,
      onHookError: (phase, hook, err) => log.warn({ err, phase, hook }, 'hook failed; the turn went on'),
    });
    registerBuiltins(this.runtime, { agentName: options.name, agent: () => this.config, ...(options.isRunning ? { isRunning: options.isRunning } : {}) });
  }
}

function createRunner(config: AgentConfig): AgentRunner {
  switch (config.provider) {
    case 'echo':
      return new EchoRunner(config.echo_delay_ms);
    case 'openai-compatible':
      return new UnavailableRunner('the openai-compatible provider is not part of this build yet; use provider = "echo"');
  }
}
