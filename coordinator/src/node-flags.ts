/**
 * Node/V8 flags the coordinator is run with: the Dockerfile's CMD, `npm run serve` and the bench
 * (which runs the coordinator in its own process) pass them; docs/operations.md says why.
 *
 * `--max-semi-space-size=16`: V8 sizes its young generation by the allocation rate it has seen
 * and keeps it; after start-up and any burst (migrations, a thousand workers saying Hello, a job
 * burst) it stays at 2 × 64 MB, nearly empty while the coordinator idles (about 90 MB of RSS
 * with 1,000 idle workers). 16 MB semi-spaces cap it at 32 MB; collections of the young
 * generation become more frequent and each stays short.
 */
export const COORDINATOR_NODE_FLAGS = ['--max-semi-space-size=16'];
