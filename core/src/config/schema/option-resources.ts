import Type from 'typebox';
import { Ignored, Strict } from './common.ts';
import { RouteOptions, VirtualHostOptions } from './virtual-service.ts';

/**
 * Gloo Gateway's policy attachment (`targetRefs`): options attached to Kubernetes Gateway API
 * Gateways and HTTPRoutes. Gloo Edge's VirtualServices ignore it, and so does Gatehouse.
 */
const TargetRefs = Ignored(
  Type.Array(
    Strict({
      group: Type.Optional(Type.String()),
      kind: Type.Optional(Type.String()),
      name: Type.Optional(Type.String()),
      namespace: Type.Optional(Type.Union([Type.String(), Type.Null()])),
      sectionName: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    }),
    { maxItems: 64 },
  ),
  'targetRefs attach options to Kubernetes Gateway API resources (Gloo Gateway); here options apply only where a VirtualService or route names this resource in optionsConfigRefs.delegateOptions',
);

/** Gloo's VirtualHostOption (`gateway.solo.io/v1`): virtual host options a VirtualService takes by `virtualHost.optionsConfigRefs`. */
export const VirtualHostOptionSpec = Strict({
  options: Type.Optional(VirtualHostOptions),
  targetRefs: Type.Optional(TargetRefs),
});
export type VirtualHostOptionSpec = Type.Static<typeof VirtualHostOptionSpec>;

/** Gloo's RouteOption (`gateway.solo.io/v1`): route options a route takes by its `optionsConfigRefs`. */
export const RouteOptionSpec = Strict({
  options: Type.Optional(RouteOptions),
  targetRefs: Type.Optional(TargetRefs),
});
export type RouteOptionSpec = Type.Static<typeof RouteOptionSpec>;
