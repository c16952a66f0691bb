# syntax=docker/dockerfile:1
# The gateway / extauth image: `gatehouse run|gateway|extauth|install ...`.
# Build from the repository root:  docker build -f images/gateway.Dockerfile -t gatehouse:VERSION .
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
# Empty unless given (see the npm step): Node ignores an empty value.
ARG NODE_EXTRA_CA_CERTS
WORKDIR /src
# Manifests first, so the dependency layer is reused while only sources change.
COPY package.json package-lock.json ./
COPY core/package.json core/
COPY plugin-sdk/package.json plugin-sdk/
COPY init-container/package.json init-container/
COPY test/package.json test/
COPY plugins/ plugins/
# No scripts yet: `prepare` compiles sources, which are copied next.
# npm's cache survives between builds (BuildKit and buildah cache mounts). Behind a TLS-intercepting
# proxy, pass its CA bundle as the secret `ca-certificates` and NODE_EXTRA_CA_CERTS=/run/secrets/ca-certificates
# (test/images/images.ts does); it is mounted for this step only and never lands in a layer.
RUN --mount=type=cache,target=/root/.npm,sharing=locked \
    --mount=type=secret,id=ca-certificates \
    npm ci --no-audit --no-fund --ignore-scripts
COPY . .
# The build steps live in images/build.ts (tested without a Docker engine): the compiled
# JavaScript of core and plugin-sdk, their launchers, and only their production node_modules.
RUN node images/build.ts gateway /out

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
# One malloc arena bounds RSS while streaming (see NODE_ENV_DEFAULTS in plugin-sdk/bin/launch.js).
ENV MALLOC_ARENA_MAX=1
WORKDIR /app
COPY --from=build /out/ /app/
# Non-root; Kubernetes manifests from `gatehouse install render` run it with the same ids.
USER 10001:10001
EXPOSE 8080 9901 8083
# The flags the launcher would otherwise add by re-executing (plugin-sdk/bin/launch.js NODE_FLAGS):
# The launcher's NODE_FLAGS (plugin-sdk/bin/launch.js): --no-node-snapshot for isolated-vm (auth
# plugin sandboxes), a 16 MB young generation, --expose-gc for the chunk collector, no Maglev.
ENTRYPOINT ["node", "--no-node-snapshot", "--max-semi-space-size=16", "--expose-gc", "--no-maglev", "/app/core/bin/gatehouse.js"]
CMD ["run", "--config-dir", "/etc/gatehouse/config"]
