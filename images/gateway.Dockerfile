# syntax=docker/dockerfile:1
# The gateway / extauth image: `gatehouse run|gateway|extauth|install ...`.
# Build from the repository root:  docker build -f images/gateway.Dockerfile -t gatehouse:VERSION .
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
# Manifests first, so the dependency layer is reused while only sources change.
COPY package.json package-lock.json ./
COPY core/package.json core/
COPY plugin-sdk/package.json plugin-sdk/
COPY init-container/package.json init-container/
COPY test/package.json test/
COPY plugins/ plugins/
RUN npm ci --no-audit --no-fund
COPY . .
# The build steps live in images/build.ts (tested without a Docker engine): sources of core and
# plugin-sdk without tests, plus only their production node_modules.
RUN node images/build.ts gateway /out

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /out/ /app/
# Non-root; Kubernetes manifests from `gatehouse install render` run it with the same ids.
USER 10001:10001
EXPOSE 8080 9901 8083
# --no-node-snapshot: isolated-vm (auth plugin sandboxes) needs it on Node 20+.
ENTRYPOINT ["node", "--no-node-snapshot", "/app/core/src/cli/main.ts"]
CMD ["run", "--config-dir", "/etc/gatehouse/config"]
