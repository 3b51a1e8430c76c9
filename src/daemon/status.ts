import { nextFireAt } from '../config/schedules.js';
import { registerAdminPage } from '../actions/admin.js';
import { VERSION } from '../util/version.js';
import { registerStatusRoutes } from '../observe/routes.js';
import type { DaemonStatus } from '../actions/daemon-status.js';
import { defineComponent, type Services, type StatusView } from './services.js';

type StatusSources = Pick<Services, 'config' | 'dispatcher' | 'supervisor' | 'tracker' | 'workspaces' | 'mcp' | 'storage' | 'topology' | 'http'>;

/** The `status` service: the /status payload and readiness, computed from the services. */
export class StatusService implements StatusView {
  readonly startedAt = new Date();
  /** Set by the lifecycle once every configured channel has been handed to the supervisor. */
  channelsLoaded = false;
  reminders: StatusView['reminders'];

  constructor(private readonly s: StatusSources) {}

  /**
   * Every configured channel is past its first connect attempt (an empty supervisor during
   * start-up is not ready), and the database takes writes; then what `[http] ready_requires`
   * adds: at least one channel up, or every one (up: connected, or on standby behind another
   * instance in cluster mode).
   */
  ready(): boolean {
    if (!(this.channelsLoaded && this.s.supervisor.ready() && this.s.storage.health.ok)) return false;
    const requires = this.s.config.config.http.ready_requires;
    if (requires === 'http') return true;
    const up = this.s.supervisor.statuses().map((c) => c.state === 'connected' || c.state === 'standby');
    return requires === 'any_channel' ? up.some(Boolean) : up.every(Boolean);
  }

  status(): DaemonStatus {
    const { config, dispatcher, supervisor, tracker, workspaces, mcp, storage, topology } = this.s;
    const snap = dispatcher.snapshot();
    const cluster = topology.status();
    return {
      version: VERSION,
      pid: process.pid,
      started_at: this.startedAt.toISOString(),
      uptime_s: Math.round((Date.now() - this.startedAt.getTime()) / 1000),
      generation: config.generation,
      ready: this.ready(),
      ready_requires: config.config.http.ready_requires,
      channels: supervisor
        .statuses()
        .map((s) => ({ ...s, in_flight: snap.channels[s.id]?.inFlight ?? 0, queued: snap.channels[s.id]?.queued ?? 0, held: dispatcher.held(s.id) })),
      turns: { in_flight: snap.inFlight, queued: snap.queued, list: tracker.list() },
      agents: [...workspaces.byName.values()].map((w) => w.status()),
      mcp_servers: mcp.status(),
      last_reload: config.lastReload,
      storage: storage.status(),
      ...(cluster ? { cluster } : {}),
      webhooks: this.s.http.webhooks(),
      schedules: config.config.schedules.map((s) => ({ id: s.id, channel: s.channel, next_fire_at: nextFireAt(s) })),
      ...(this.reminders ? { reminders: this.reminders() } : {}),
    };
  }
}

/** Provides `status` and serves /healthz, /readyz, /metrics and the /admin page from it. */
export const statusComponent = defineComponent({
  name: 'status',
  provides: ['status'],
  inject: ['http', 'metrics', 'config', 'dispatcher', 'supervisor', 'tracker', 'workspaces', 'mcp', 'storage', 'topology'],
  start: (ctx) => {
    const config = ctx.use('config');
    const status = new StatusService({
      config,
      dispatcher: ctx.use('dispatcher'),
      supervisor: ctx.use('supervisor'),
      tracker: ctx.use('tracker'),
      workspaces: ctx.use('workspaces'),
      mcp: ctx.use('mcp'),
      storage: ctx.use('storage'),
      topology: ctx.use('topology'),
      http: ctx.use('http'),
    });
    const http = ctx.use('http');
    ctx.effect(registerStatusRoutes(http, ctx.use('metrics'), () => status.status()));
    ctx.effect(
      registerAdminPage(
        http,
        () => config.secrets.get('http', 'admin_token'),
        () => status.status(),
      ),
    );
    ctx.provide('status', status);
  },
});
