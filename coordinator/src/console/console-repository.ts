/**
 * The web console's own reads (plugin.ts): the dashboard's archive size and the admin workers
 * page's current jobs. Each is one statement over other domains' tables, shown as they are.
 */
import { sql, type Db } from '../db/sql.js';

const ARCHIVE_SIZE = sql<{ source: string }, { networks: string; channels: string; events: string | null }>(
  `select (select count(*) from irc_networks where source = :source) as networks,
          count(c.id) as channels, sum(c.event_count) as events
     from irc_channels c join irc_networks n on n.id = c.network_id and n.source = :source`,
);

const CURRENT_JOBS = sql<Record<string, never>, { worker_id: number; id: number; label: string }>(
  `select distinct on (l.worker_id) l.worker_id, j.id, coalesce(j.source_label, j.source_filename, 'Job ' || j.id) as label
     from speech_leases l join speech_jobs j on j.id = l.job_id and j.attempt = l.attempt
    where l.ended_at is null and j.status in ('downloading', 'transcribing', 'finalizing')
    order by l.worker_id, l.created_at desc`,
);

/** Networks, channels and stored events of the chat-log archive `source`. */
export async function archiveSize(db: Db, source: string) {
  const r = await ARCHIVE_SIZE.first(db, { source });
  return { networks: Number(r?.networks ?? 0), channels: Number(r?.channels ?? 0), events: Number(r?.events ?? 0) };
}

/** The job each worker holds a live lease on (worker id → job). */
export async function currentJobs(db: Db): Promise<Map<number, { id: number; label: string }>> {
  const rows = await CURRENT_JOBS.rows(db, {});
  return new Map(rows.map((r) => [Number(r.worker_id), { id: Number(r.id), label: r.label }]));
}
