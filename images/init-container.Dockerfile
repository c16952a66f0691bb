# syntax=docker/dockerfile:1
# The init-container image: gatehouse-init, one bundled file on Node.
# Build from the repository root:  docker build -f images/init-container.Dockerfile -t gatehouse-init:VERSION .
# Plugin images built with `gatehouse-plugin image build --base <this image>` run as their own
# init container: this entrypoint plus `--rootfs / --tag VERSION`.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
# Empty unless given (see the npm step): Node ignores an empty value.
ARG NODE_EXTRA_CA_CERTS
WORKDIR /src
COPY package.json package-lock.json ./
COPY core/package.json core/
COPY plugin-sdk/package.json plugin-sdk/
COPY init-container/package.json init-container/
COPY test/package.json test/
COPY plugins/ plugins/
# No scripts: `prepare` compiles sources, which are copied next (esbuild needs no install script).
# npm's cache survives between builds (BuildKit and buildah cache mounts). Behind a TLS-intercepting
# proxy, pass its CA bundle as the secret `ca-certificates` and NODE_EXTRA_CA_CERTS=/run/secrets/ca-certificates
# (test/images/images.ts does); it is mounted for this step only and never lands in a layer.
RUN --mount=type=cache,target=/root/.npm,sharing=locked \
    --mount=type=secret,id=ca-certificates \
    npm ci --no-audit --no-fund --ignore-scripts
COPY . .
# images/build.ts bundles init-container/src/cli/main.ts and its dependencies into one file.
RUN node images/build.ts init-container /out

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /out/gatehouse-init.mjs /app/gatehouse-init.mjs
USER 10001:10001
ENTRYPOINT ["node", "/app/gatehouse-init.mjs"]
CMD ["--help"]
