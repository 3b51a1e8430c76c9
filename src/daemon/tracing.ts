import { messageTracing, UNTRACED } from '../dispatch/tracing.js';
import { errorMessage } from '../contracts/errors.js';
import { VERSION } from '../util/version.js';
import { defineComponent } from './services.js';

/** At shutdown, buffered spans get this long to reach the collector; then they are dropped. */
export const TRACE_FLUSH_TIMEOUT_MS = 5_000;
/** At most one "export failed" line per this long: a collector that is down must not flood the log. */
const EXPORT_FAILURE_LOG_EVERY_MS = 60_000;

/**
 * The `tracing` service: OpenTelemetry traces of every message when `[observe]
 * otlp_endpoint` is set. The OpenTelemetry SDK and exporter are imported here, on demand: a
 * daemon without an endpoint never loads them (test/e2e/tracing-off.test.ts checks it; the
 * bare @opentelemetry/api is loaded anyway, by prom-client).
 */
export const tracingComponent = defineComponent({
  name: 'tracing',
  provides: ['tracing'],
  inject: ['config', 'logger'],
  start: async (ctx) => {
    const config = ctx.use('config').config;
    const log = ctx.use('logger');
    const { otlp_endpoint: endpoint, service_name: serviceName, sample_ratio: sampleRatio } = config.observe;
    if (!endpoint) return ctx.provide('tracing', UNTRACED);
    const { createBackend } = await import('../observe/trace/otel.js');
    let lastFailureLogMs = -Infinity;
    const backend = createBackend({
      endpoint,
      serviceName,
      sampleRatio,
      serviceVersion: VERSION,
      ...(config.cluster?.instance_id ? { instanceId: config.cluster.instance_id } : {}),
      onExportFailed: (error) => {
        const now = Date.now();
        if (now - lastFailureLogMs < EXPORT_FAILURE_LOG_EVERY_MS) return;
        lastFailureLogMs = now;
        log.warn({ endpoint, error }, 'traces could not be exported; those spans are dropped');
      },
    });
    ctx.effect(async () => {
      const whole = await backend.shutdown(TRACE_FLUSH_TIMEOUT_MS).catch((err: unknown) => {
        log.warn({ err: errorMessage(err) }, 'tracing shutdown failed');
        return false;
      });
      if (!whole) log.warn({ endpoint, timeout_ms: TRACE_FLUSH_TIMEOUT_MS }, 'the last spans were not exported within the bound');
    });
    log.info({ endpoint, service_name: serviceName, sample_ratio: sampleRatio }, 'tracing: spans go to the OTLP endpoint');
    ctx.provide('tracing', messageTracing(backend));
  },
});
