# llmgw's own image: the control plane, the gateway, the agent and the CLI (`llmgw` on PATH).
# The Helm chart (deploy/helm/llmgw) runs it as `llmgw server`, and its model-download init
# containers as `llmgw`. Engines are not in it: they run from their own images.
#   docker build -t llmgw:dev .
#
# The base: Node 24 LTS (Node 20 is past its end of life), pinned by digest so a rebuild gets
# the same image and a moved tag changes nothing unseen. The digest is the tag's multi-platform
# index (amd64, arm64, ppc64le). To update it, read the tag's current one and replace it below:
#   docker buildx imagetools inspect node:24-bookworm-slim     # the "Digest:" line
# Another base for one build: --build-arg NODE_IMAGE=node:22-bookworm-slim@sha256:<digest>
ARG NODE_IMAGE=node:24-bookworm-slim@sha256:a9f5f7c91a432850b2a8a7797adf5eadb6c733ceed61167806cee7ea7fbc29df

FROM ${NODE_IMAGE} AS build
# better-sqlite3 and koffi fall back to compiling when no prebuilt binary fits.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` (the build) runs below, once the sources are here; the native
# addons are then built or fetched by `npm rebuild`.
RUN npm ci --ignore-scripts && npm rebuild better-sqlite3 koffi
COPY . .
RUN npm run build && npm prune --omit=dev

FROM ${NODE_IMAGE}
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist ./dist
COPY --from=build /app/node_modules ./node_modules
RUN ln -s /app/bin/llmgw.js /usr/local/bin/llmgw && mkdir -p /var/lib/llmgw && chown 65532:65532 /var/lib/llmgw
# The chart's securityContext runs it as this user, with a read-only root: data goes under data_dir.
USER 65532:65532
ENV LLMGW_DATA_DIR=/var/lib/llmgw/data
ENTRYPOINT ["llmgw"]
CMD ["server"]
