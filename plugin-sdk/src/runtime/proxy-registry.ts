/**
 * Every Proxy plugin code makes, known by identity: a Proxy can answer each read differently
 * (a bound check and the builtin after it), and V8's serializer refuses one, yet nothing in the
 * language tells a Proxy from its target. So the sandbox's `Proxy` constructor (and
 * `Proxy.revocable`) records each one it makes. Installed by the runtime (./bounded-builtins.ts)
 * before any plugin code runs; read by the bounded builtins and by `structuredClone`.
 */

// Captured at load, before plugin code can replace them.
const proxies = new WeakSet<object>();
const weakHas = WeakSet.prototype.has;
const weakAdd = WeakSet.prototype.add;
const { apply, construct, get } = Reflect;
const { defineProperty } = Object;

/** Whether `value` is a Proxy made through a tracked constructor. */
export function isTrackedProxy(value: object): boolean {
  return apply(weakHas, proxies, [value]) as boolean;
}

/**
 * Replaces `global.Proxy` with a constructor that records every Proxy it makes. It is a Proxy
 * of the native constructor, so `name`, `length`, `prototype`-less-ness and the TypeError
 * without `new` are the native's own; `revocable` is answered by the tracked one.
 */
export function trackProxies(global: { Proxy: ProxyConstructor }): void {
  const NativeProxy = global.Proxy;
  const nativeRevocable = NativeProxy.revocable;
  const revocable = {
    revocable<T extends object>(target: T, handler: ProxyHandler<T>) {
      const pair = apply(nativeRevocable, NativeProxy, [target, handler]) as { proxy: T; revoke: () => void };
      apply(weakAdd, proxies, [pair.proxy]);
      return pair;
    },
  }.revocable;
  const Tracked = new NativeProxy(NativeProxy, {
    construct(target, args, newTarget) {
      const proxy = construct(target, args, newTarget) as object;
      apply(weakAdd, proxies, [proxy]);
      return proxy;
    },
    get(target, name, receiver) {
      return name === 'revocable' ? revocable : get(target, name, receiver);
    },
  });
  defineProperty(global, 'Proxy', { value: Tracked, writable: true, configurable: true, enumerable: false });
}
