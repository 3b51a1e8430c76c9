type Fn = (...a: unknown[]) => unknown;

/**
 * `inner` seen through a Proxy: the keys of `own` answer from `own`, everything else is
 * `inner`'s, with its methods bound to it (their private fields need that). Each method is
 * bound once and reused while `inner` holds the same function: a turn reads an adapter's
 * methods several times per message, and a fresh bound function per read was measurable.
 */
export function boundView<T extends object>(inner: T, own: Partial<T>): T {
  const bound = new Map<PropertyKey, { fn: Fn; bound: Fn }>();
  return new Proxy(inner, {
    get(target, key) {
      if (Object.hasOwn(own, key)) return own[key as keyof T];
      const v = Reflect.get(target, key, target) as unknown;
      if (typeof v !== 'function') return v;
      const hit = bound.get(key);
      if (hit?.fn === v) return hit.bound;
      const fn = v as Fn;
      const b = fn.bind(target) as Fn;
      bound.set(key, { fn, bound: b });
      return b;
    },
  });
}
