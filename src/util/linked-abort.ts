/**
 * Controllers that abort when a long-lived signal does (the daemon's hard stop, shared by
 * every running turn), with the source's reason.
 *
 * `AbortSignal.any([source])` per dependent ties each one to its source with weak references
 * and a finalization-registry cell, which the collector must trace and process at every full
 * collection while the dependent lives; under a burst of 1,000 turns those cells are a good
 * part of what each running turn keeps. Adding an abort listener to the shared source instead
 * walks the source's whole listener list on every add (EventTarget refuses duplicates), so a
 * burst costs time quadratic in the turns. Here the source gets one listener, ever, and each
 * dependent joins and leaves a Set in constant time.
 */
const dependents = new WeakMap<AbortSignal, Set<AbortController>>();

/**
 * Aborts `controller` when `source` aborts (at once when it already has). Unlink it with
 * `unlinkAbort` when it is no longer needed, or the source keeps it alive until the source
 * itself goes. (Two functions rather than a returned unlink: a closure per link is what this
 * file saves.)
 */
export function linkAbort(source: AbortSignal, controller: AbortController): void {
  if (source.aborted) {
    controller.abort(source.reason);
    return;
  }
  let set = dependents.get(source);
  if (!set) {
    const linked = new Set<AbortController>();
    set = linked;
    dependents.set(source, linked);
    source.addEventListener(
      'abort',
      () => {
        dependents.delete(source);
        for (const c of linked) c.abort(source.reason);
        linked.clear();
      },
      { once: true },
    );
  }
  set.add(controller);
}

/** Ends what `linkAbort(source, controller)` started; a no-op when it was never linked or already ran. */
export function unlinkAbort(source: AbortSignal, controller: AbortController): void {
  dependents.get(source)?.delete(controller);
}

/** How many controllers wait on `source` now (for tests and diagnostics: each link must end). */
export function linkedTo(source: AbortSignal): number {
  return dependents.get(source)?.size ?? 0;
}
