import type { Orm } from '../../coordinator/src/db/orm.js';
import { WorkerDirectory } from '../../coordinator/src/speech/workers/worker-directory.js';

/**
 * Registers a worker that once said hello advertising `models`, stored the way the coordinator
 * stores a Hello (speech_workers.capabilities), without a session. Submissions for those models are
 * then accepted (the model catalog serves what registered workers advertise). `present: true` also
 * marks it seen now, as a connected worker's heartbeat would; the default is a worker that is offline.
 */
export async function registerModelWorker(
  orm: Orm,
  name: string,
  models: string[],
  opts: { present?: boolean; local?: boolean; modelLanguages?: Record<string, string[]> } = {},
): Promise<{ id: number; secret: string }> {
  const created = await new WorkerDirectory(orm, 45_000).createWorker(name);
  const capabilities = {
    models,
    engines: ['test'],
    diarization: true,
    canFetchUrls: true,
    device: 'cpu',
    local: opts.local ?? false,
    ...(opts.modelLanguages ? { modelLanguages: opts.modelLanguages } : {}),
  };
  await orm.em
    .getConnection()
    .execute(`update speech_workers set capabilities = ?::jsonb, last_seen_at = ${opts.present ? 'now()' : 'null'} where id = ?`, [
      JSON.stringify(capabilities),
      created.id,
    ]);
  return created;
}
