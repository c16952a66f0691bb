import type { CheckContext } from '../../config/check-context.ts';
import type { Diagnostic, PathSegment } from '../../config/diagnostic.ts';
import type { Resource } from '../../config/resource.ts';
import { FILTER_FACTORIES } from './registry.ts';

type WithFilterOptions = Resource<'VirtualService'> | Resource<'RouteTable'> | Resource<'VirtualHostOption'> | Resource<'RouteOption'>;

/**
 * The filter factories' load-time checks (`HttpFilterFactory.check`) over every options object a
 * resource holds: the virtual host's and each route's, or an options resource's own. Registered
 * per kind in `core/src/resource-checks.ts`, so `config/` never imports the proxy (no cycle).
 */
export function checkFilterOptions(resource: WithFilterOptions, ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  const at = (p: PathSegment[], code: string, message: string, severity?: 'error' | 'warning') => ctx.at(p, code, message, severity);
  const check = (options: object | undefined, path: PathSegment[]) => {
    if (!options) return;
    for (const factory of FILTER_FACTORIES) if (factory.check) out.push(...factory.check(options as Record<string, unknown>, at, path));
  };
  const routes = (list: readonly { options?: object | undefined }[] | undefined, base: PathSegment[]) => list?.forEach((route, i) => check(route.options, [...base, i, 'options']));
  switch (resource.kind) {
    case 'VirtualService':
      check(resource.spec.virtualHost.options, ['spec', 'virtualHost', 'options']);
      routes(resource.spec.virtualHost.routes, ['spec', 'virtualHost', 'routes']);
      break;
    case 'RouteTable':
      routes(resource.spec.routes, ['spec', 'routes']);
      break;
    default:
      check(resource.spec.options, ['spec', 'options']);
  }
  return out;
}
