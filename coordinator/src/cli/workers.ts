import { fail } from './errors.js';
import { iso, shownOnce, table } from './format.js';
import { program } from './program.js';
import { runWith } from './runner.js';

// Presence freshness does not matter to the CLI's listing beyond "seen recently"; use the default TTL.
const runWorkers = runWith(async (orm) => new (await import('../speech/workers/worker-directory.js')).WorkerDirectory(orm, 45_000));

/** `worker:*`: worker agents and their secrets. */
export function registerWorkerCommands(): void {
  program
    .command('worker:create <name>')
    .description('register a worker agent and print its secret once (give it to the agent as WORKER_SECRET)')
    .action(
      runWorkers(async (workers, name: string) => {
        const { id, secret } = await workers.createWorker(name);
        return { json: { worker: { id, name }, secret }, text: [`created worker ${name} (id ${id})`, ...shownOnce('secret', secret)] };
      }),
    );

  program
    .command('worker:rotate <name>')
    .description('issue a new secret for a worker (the old one stops working) and re-enable it if revoked')
    .action(
      runWorkers(async (workers, name: string) => {
        const secret = await workers.rotateSecret(name);
        return { json: { worker: { name }, secret }, text: [`new secret for ${name}`, ...shownOnce('secret', secret)] };
      }),
    );

  program
    .command('worker:revoke <name>')
    .description('revoke a worker agent; its calls are refused from now on')
    .action(
      runWorkers(async (workers, name: string) => {
        if (!(await workers.revokeWorker(name))) fail('not_found', `no worker named "${name}"`);
        return { json: { worker: { name } }, text: [`worker ${name} revoked`] };
      }),
    );

  program
    .command('worker:list')
    .description('list worker agents with their last contact and advertised capabilities')
    .action(
      runWorkers(async (workers) => {
        const list = (await workers.listWorkers()).map((w) => ({
          id: w.id,
          name: w.name,
          revoked: w.revoked,
          last_seen_at: iso(w.lastSeenAt),
          contract_version: w.contractVersion,
          agent_version: w.agentVersion,
          hostname: w.hostname,
          capabilities: w.capabilities,
        }));
        return {
          json: { workers: list },
          text: table(
            ['ID', 'NAME', 'STATE', 'LAST SEEN', 'HOST', 'MODELS', 'ENGINES', 'DIARIZATION'],
            list.map((w) => [
              String(w.id),
              w.name,
              w.revoked ? 'revoked' : 'active',
              w.last_seen_at?.replace('T', ' ').slice(0, 19) ?? '-',
              w.hostname ?? '-',
              w.capabilities?.models.join(',') || '-',
              w.capabilities?.engines.join(',') || '-',
              // a diarizer that cannot run says why (missing or broken model files)
              w.capabilities?.diarization
                ? (w.capabilities.diarizationEngine ?? 'yes')
                : w.capabilities?.diarizationError
                  ? `no: ${w.capabilities.diarizationError}`
                  : '-',
            ]),
            'no workers',
          ),
        };
      }),
    );
}
