/** The SQL of status pages (statuspage-service.ts): pages, components, incidents and maintenances, their updates and the audit trail. */
import { sql } from '../../db/sql.js';
import type { AuditRow, ComponentRow, IncidentRow, PageRow, UpdateRow } from './statuspage-model.js';

type Id = { id: number };
type OnPage = { id: number; pageId: number };

export const StatusPages = {
  // ---- pages
  listFor: sql<{ isAdmin: boolean; userId: number }, PageRow>(
    `select p.*, u.username as owner from status_pages p join users u on u.id = p.owner_id
      where :isAdmin or p.owner_id = :userId order by p.slug`,
  ),
  /** A page the user may manage: their own, or any for an administrator. */
  managed: sql<{ pageId: number; isAdmin: boolean; userId: number }, PageRow>(
    `select p.*, u.username as owner from status_pages p join users u on u.id = p.owner_id where p.id = :pageId and (:isAdmin or p.owner_id = :userId)`,
  ),
  bySlug: sql<{ slug: string }, PageRow>('select * from status_pages where slug = :slug'),
  audit: sql<{ pageId: number; slug: string; actorId: number; actor: string; action: string; target: string | null; detail: string }>(
    'insert into status_audit (page_id, page_slug, actor_id, actor, action, target, detail) values (:pageId, :slug, :actorId, :actor, :action, :target, :detail::jsonb)',
  ),
  touch: sql<Id>('update status_pages set updated_at = now() where id = :id'),
  create: sql<{ ownerId: number; slug: string; name: string; timeZone: string }, PageRow>(
    'insert into status_pages (owner_id, slug, name, time_zone) values (:ownerId, :slug, :name, :timeZone) returning *',
  ),
  update: sql<{ id: number; name: string; timeZone: string }, PageRow>(
    'update status_pages set name = :name, time_zone = :timeZone, updated_at = now() where id = :id returning *',
  ),
  remove: sql<Id>('delete from status_pages where id = :id'),
  auditOf: sql<{ pageId: number }, AuditRow>(
    'select id, actor, action, target, detail, at from status_audit where page_id = :pageId order by at desc, id desc limit 200',
  ),

  // ---- components
  components: sql<{ pageId: number }, ComponentRow>('select * from status_components where page_id = :pageId order by position, id'),
  group: sql<OnPage, ComponentRow>('select * from status_components where id = :id and page_id = :pageId and is_group'),
  componentForUpdate: sql<OnPage, ComponentRow>('select * from status_components where id = :id and page_id = :pageId for update'),
  componentIds: sql<{ pageId: number; ids: number[] }, Id>('select id from status_components where page_id = :pageId and id = any(:ids::int[])'),
  addComponent: sql<
    { pageId: number; groupId: number | null; isGroup: boolean; name: string; description: string | null; status: string; position: number | null },
    ComponentRow
  >(
    `insert into status_components (page_id, group_id, is_group, name, description, status, position)
     values (:pageId, :groupId, :isGroup, :name, :description, :status,
             coalesce(:position, (select coalesce(max(position), 0) + 1 from status_components where page_id = :pageId))) returning *`,
  ),
  updateComponent: sql<{ id: number; name: string; description: string | null; status: string; groupId: number | null; position: number }, ComponentRow>(
    `update status_components set name = :name, description = :description, status = :status, group_id = :groupId, position = :position,
            updated_at = now() where id = :id returning *`,
  ),
  removeComponent: sql<OnPage, ComponentRow>('delete from status_components where id = :id and page_id = :pageId returning *'),
  unlinkComponent: sql<OnPage>('update status_incidents set component_ids = array_remove(component_ids, :id) where page_id = :pageId'),

  // ---- incidents, maintenances and their updates
  incidents: sql<{ pageId: number }, IncidentRow>('select * from status_incidents where page_id = :pageId order by created_at desc, id desc'),
  incident: sql<Id, IncidentRow>('select * from status_incidents where id = :id'),
  incidentForUpdate: sql<OnPage, IncidentRow>('select * from status_incidents where id = :id and page_id = :pageId for update'),
  addIncident: sql<
    {
      pageId: number;
      kind: string;
      name: string;
      status: string;
      impact: string;
      componentIds: number[];
      internalNotes: string;
      scheduledFor: string | null;
      scheduledUntil: string | null;
    },
    IncidentRow
  >(
    `insert into status_incidents (page_id, kind, name, status, impact, component_ids, internal_notes, scheduled_for, scheduled_until)
     values (:pageId, :kind, :name, :status, :impact, :componentIds::int[], :internalNotes, :scheduledFor, :scheduledUntil) returning *`,
  ),
  updateIncident: sql<{ id: number; name: string; impact: string; componentIds: number[]; internalNotes: string }, IncidentRow>(
    `update status_incidents set name = :name, impact = :impact, component_ids = :componentIds::int[], internal_notes = :internalNotes,
            updated_at = now() where id = :id returning *`,
  ),
  /** A published update moves its incident to the update's status (resolved/completed close it). */
  applyPublished: sql<{ id: number; status: string }>(
    `update status_incidents set status = :status, updated_at = now(),
            resolved_at = case when :status in ('resolved', 'completed') then coalesce(resolved_at, now()) else null end where id = :id`,
  ),
  updates: sql<{ pageId: number }, UpdateRow>(
    `select u.* from status_incident_updates u join status_incidents i on i.id = u.incident_id where i.page_id = :pageId
      order by u.created_at desc, u.id desc`,
  ),
  addUpdate: sql<{ incidentId: number; status: string; body: string; publish: boolean }, UpdateRow>(
    `insert into status_incident_updates (incident_id, status, body, published_at)
     values (:incidentId, :status, :body, case when :publish then now() else null end) returning *`,
  ),
  updateForPublish: sql<{ id: number; incidentId: number; pageId: number }, UpdateRow>(
    `select u.* from status_incident_updates u join status_incidents i on i.id = u.incident_id
      where u.id = :id and u.incident_id = :incidentId and i.page_id = :pageId for update of u`,
  ),
  publish: sql<Id, UpdateRow>('update status_incident_updates set published_at = now(), updated_at = now() where id = :id returning *'),

  // ---- the public summary: published data only
  /** Open incidents, and maintenances that are upcoming or under way, with at least one published update. */
  publicEvents: sql<{ pageId: number }, IncidentRow>(
    `select i.* from status_incidents i
      where i.page_id = :pageId and exists (select 1 from status_incident_updates u where u.incident_id = i.id and u.published_at is not null)
        and ((i.kind = 'incident' and i.status <> 'resolved')
          or (i.kind = 'maintenance' and (i.status in ('in_progress', 'verifying') or (i.status = 'scheduled' and i.scheduled_until > now()))))
      order by coalesce(i.scheduled_for, i.created_at), i.id`,
  ),
  publishedUpdates: sql<{ pageId: number }, UpdateRow>(
    `select u.* from status_incident_updates u join status_incidents i on i.id = u.incident_id
      where i.page_id = :pageId and u.published_at is not null order by u.published_at desc, u.id desc`,
  ),
};
