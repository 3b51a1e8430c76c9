import { z } from 'zod';
import { CodedError, errorMessage } from '../contracts/errors.js';
import { readBody, sameOriginJson, sendJson } from '../util/http-helpers.js';
import type { HttpRoutes } from '../contracts/http.js';
import type { CommandRegistry } from '../runtime/commands.js';
import { checkAdmin } from './access.js';
import type { Action, ActionCaller, ManagementApi } from './action.js';

/** What `GET /actions` tells the CLI, so any registered action gets a subcommand. */
export interface ActionDescriptor {
  name: string;
  description: string;
  method: 'GET' | 'POST';
  path: string;
  cli: string;
  args: string[];
  /** Optional positional arguments after `args`. */
  optional_args?: string[];
  input: unknown;
}

/** The exit status an action gives its result (e.g. 78 for a refused reload), for the CLI. */
export const EXIT_STATUS_HEADER = 'x-channeld-exit-status';

export function cliName(a: Action): string {
  return a.cli?.name ?? a.name;
}

/**
 * The management actions and their faces. Registering an action adds its HTTP route at
 * once and its slash command to every workspace built afterwards (and to those that exist,
 * through `attachSlash`).
 */
export class ActionRegistry {
  readonly #actions = new Map<string, Action>();
  readonly #slashTargets = new Set<{ commands: CommandRegistry; agent: string }>();
  readonly #slashDisposers = new Map<string, Array<() => void>>();
  #http: { routes: HttpRoutes; adminToken: () => string | undefined; disposers: Map<string, Array<() => void>> } | undefined;

  constructor(private readonly api: ManagementApi) {}

  list(): Action[] {
    return [...this.#actions.values()];
  }

  get(name: string): Action | undefined {
    return this.#actions.get(name);
  }

  register(action: Action): () => void {
    if (this.#actions.has(action.name)) throw new CodedError('ACTION_DUPLICATE', `action "${action.name}" is already registered`);
    this.#actions.set(action.name, action);
    if (this.#http) this.#route(action);
    for (const t of this.#slashTargets) this.#slash(action, t);
    return () => {
      this.#actions.delete(action.name);
      for (const d of this.#http?.disposers.get(action.name) ?? []) d();
      for (const d of this.#slashDisposers.get(action.name) ?? []) d();
      this.#slashDisposers.delete(action.name);
    };
  }

  /** Runs an action: validates input and output with its schemas. */
  async run(action: Action, rawInput: unknown, caller: ActionCaller): Promise<unknown> {
    const input = action.input.safeParse(rawInput ?? {});
    if (!input.success) throw new CodedError('ACTION_INPUT_INVALID', z.prettifyError(input.error));
    const out = await action.handler(input.data, { api: this.api, caller });
    return action.output.parse(out);
  }

  describe(): ActionDescriptor[] {
    return this.list().map((a) => ({
      name: a.name,
      description: a.description,
      method: a.readOnly ? 'GET' : 'POST',
      path: `/actions/${a.name}`,
      cli: cliName(a),
      args: a.cli?.args ?? [],
      ...(a.cli?.optionalArgs ? { optional_args: a.cli.optionalArgs } : {}),
      input: z.toJSONSchema(a.input, { unrepresentable: 'any' }),
    }));
  }

  /** Serves every action (and `GET /actions`) on the HTTP server, behind the admin check. */
  attachHttp(routes: HttpRoutes, adminToken: () => string | undefined): () => void {
    this.#http = { routes, adminToken, disposers: new Map() };
    const index = routes.route('GET', '/actions', (req, res, url) => {
      if (!this.#allowed(req, res, url)) return;
      sendJson(res, 200, this.describe());
    });
    for (const a of this.#actions.values()) this.#route(a);
    return () => {
      index();
      for (const ds of this.#http?.disposers.values() ?? []) for (const d of ds) d();
      this.#http = undefined;
    };
  }

  #allowed(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse, url: URL): boolean {
    const verdict = checkAdmin(req, url, this.#http!.adminToken());
    if (verdict === 'ok') return true;
    sendJson(res, verdict === 'forbidden' ? 403 : 401, {
      error:
        verdict === 'forbidden'
          ? 'management routes answer loopback clients only (set [http] admin_token_env to allow others with a token)'
          : 'a valid admin bearer token is required',
    });
    return false;
  }

  #route(action: Action): void {
    const http = this.#http!;
    const method = action.readOnly ? 'GET' : 'POST';
    const handler = async (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse, url: URL) => {
      if (!this.#allowed(req, res, url)) return;
      let input: unknown = Object.fromEntries(url.searchParams);
      delete (input as Record<string, unknown>).token;
      if (method === 'POST') {
        // CSRF: a page of another site in the operator's browser is on loopback too.
        const origin = sameOriginJson(req);
        if (origin !== 'ok') {
          req.resume();
          if (origin === 'not_json') sendJson(res, 415, { error: 'send the input as a JSON body with Content-Type: application/json' });
          else sendJson(res, 403, { error: "management changes are accepted from this daemon's own pages or non-browser clients only" });
          return;
        }
        const body = await readBody(req, 64 * 1024);
        if (body === 'too_large') return sendJson(res, 413, { error: 'body too large' });
        try {
          input = body.length ? JSON.parse(body.toString('utf8')) : {};
        } catch {
          return sendJson(res, 400, { error: 'the body is not JSON' });
        }
      }
      try {
        const out = await this.run(action, input, { face: 'http' });
        const exit = action.exitStatus?.(out) ?? 0;
        if (exit) res.setHeader(EXIT_STATUS_HEADER, String(exit));
        // The CLI asks for text: the same data, rendered by the action's own format().
        if (action.format && (req.headers.accept ?? '').includes('text/plain')) {
          res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(`${action.format(out)}\n`);
          return;
        }
        sendJson(res, 200, out);
      } catch (err) {
        sendJson(res, httpStatusOf(err), { error: errorMessage(err) });
      }
    };
    http.disposers.set(
      action.name,
      [`/actions/${action.name}`, ...(action.httpAliases ?? [])].map((p) => http.routes.route(method, p, handler)),
    );
  }

  /** Gives a workspace's command registry the slash faces; returns the disposer. */
  attachSlash(commands: CommandRegistry, agent: string): () => void {
    const target = { commands, agent };
    this.#slashTargets.add(target);
    for (const a of this.#actions.values()) this.#slash(a, target);
    return () => this.#slashTargets.delete(target);
  }

  #slash(action: Action, t: { commands: CommandRegistry; agent: string }): void {
    if (!action.slash) return;
    const keys = action.slash.args ?? [];
    const dispose = t.commands.register({
      name: action.slash.name ?? action.name,
      help: action.slash.help ?? action.description,
      ...(keys.length ? { usage: keys.map((k) => k.toUpperCase()).join(' ') } : {}),
      handler: async (ctx, args) => {
        const words = args.split(/\s+/).filter(Boolean);
        const input = Object.fromEntries(keys.map((k, i) => [k, words[i]]).filter(([, v]) => v !== undefined));
        try {
          const out = await this.run(action, input, {
            face: 'slash',
            scope: ctx.scope,
            channelId: ctx.message.channelId,
            agent: t.agent,
            senderId: ctx.message.sender.id,
          });
          return action.format ? action.format(out) : JSON.stringify(out, null, 2);
        } catch (err) {
          return errorMessage(err);
        }
      },
    });
    this.#slashDisposers.set(action.name, [...(this.#slashDisposers.get(action.name) ?? []), dispose]);
  }
}

/** Input that does not fit the action's schema is a 400 (with zod's message); what it names not existing, a 404. */
function httpStatusOf(err: unknown): number {
  if (!(err instanceof CodedError)) return 500;
  return err.code === 'ACTION_INPUT_INVALID' ? 400 : err.code === 'ACTION_NOT_FOUND' ? 404 : 500;
}
