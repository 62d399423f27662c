import { JOB_STATUSES, type JobStatus } from '@sonar/shared';
import type { Orm } from '../../db/orm.js';

/** Jobs per status (every status, 0 when none) for the queue gauge of /metrics. */
export async function jobCountsByStatus(orm: Orm): Promise<Record<JobStatus, number>> {
  const rows = await orm.em.getConnection().execute<Array<{ status: string; n: string }>>('select status, count(*) as n from speech_jobs group by status');
  return Object.fromEntries(JOB_STATUSES.map((st) => [st, Number(rows.find((r) => r.status === st)?.n ?? 0)])) as Record<JobStatus, number>;
}
