/** The SQL of the reputation service (reputation-service.ts): community reports and their audit trail. */
import { sql } from '../../db/sql.js';
import type { ReportRow } from './reputation-service.js';

type TargetKey = { targetType: string; target: string };
type AuditInsert = TargetKey & { at: Date; actorId: number; detail: string; clientIp: string };

export const Reputation = {
  reportsOf: sql<TargetKey, ReportRow>(
    `select id, reporter_id, category, weight, created_at from reputation_reports where target_type = :targetType and target = :target`,
  ),
  /** Serialises one user's reports until the transaction ends. */
  lockReporter: sql<{ userId: number }>('select pg_advisory_xact_lock(29285, :userId)'),
  reportsSince: sql<{ userId: number; since: Date }, { n: string }>(
    `select count(*) as n from reputation_audit where actor_id = :userId and action in ('report', 'replace') and at > :since`,
  ),
  /** The user's report of the target, replacing an earlier one (`replaced`). */
  saveReport: sql<
    TargetKey & { userId: number; category: string; comment: string; weight: number; at: Date },
    { id: number; created_at: Date; replaced: boolean }
  >(
    `insert into reputation_reports (reporter_id, target_type, target, category, comment, weight, created_at)
     values (:userId, :targetType, :target, :category, :comment, :weight, :at)
     on conflict (target_type, target, reporter_id)
     do update set category = excluded.category, comment = excluded.comment, weight = excluded.weight, created_at = excluded.created_at
     returning id, created_at, (xmax <> 0) as replaced`,
  ),
  audit: sql<AuditInsert & { action: string }>(
    `insert into reputation_audit (at, actor_id, action, target_type, target, detail, client_ip)
     values (:at, :actorId, :action, :targetType, :target, :detail::jsonb, :clientIp)`,
  ),
  withdraw: sql<{ id: number; userId: number }, { target_type: string; target: string; category: string }>(
    `delete from reputation_reports where id = :id and reporter_id = :userId returning target_type, target, category`,
  ),
  auditOf: sql<TargetKey, { at: Date; actor: string | null; action: string; detail: Record<string, unknown>; client_ip: string | null }>(
    `select a.at, u.username as actor, a.action, a.detail, a.client_ip
       from reputation_audit a left join users u on u.id = a.actor_id
      where a.target_type = :targetType and a.target = :target order by a.id desc limit 500`,
  ),
};
