import type { Knex } from '@mikro-orm/postgresql';
import type { AuthUser } from '../../accounts/types.js';
import type { Orm } from '../../db/orm.js';
import { AppError, notFound, validationFailed } from '../../http/errors.js';
import { summaryOf, type Summary } from './statuspage-summary.js';
import {
  INCIDENT_STATUSES,
  MAINTENANCE_STATUSES,
  type AuditRow,
  type ComponentRow,
  type ComponentStatus,
  type EventKind,
  type EventStatus,
  type Impact,
  type IncidentRow,
  type PageRow,
  type UpdateRow,
  iso,
  isoOf,
} from './statuspage-model.js';

export interface PageInput {
  slug: string;
  name: string;
  time_zone: string;
}
export interface ComponentInput {
  name: string;
  description?: string | null | undefined;
  status?: ComponentStatus | undefined;
  group?: boolean | undefined;
  group_id?: number | null | undefined;
  position?: number | undefined;
}
export interface IncidentInput {
  kind: EventKind;
  name: string;
  status?: EventStatus | undefined;
  impact?: Impact | undefined;
  component_ids?: number[] | undefined;
  internal_notes?: string | undefined;
  scheduled_for?: string | undefined;
  scheduled_until?: string | undefined;
  /** A first update; published at once with `publish`. */
  update?: { body: string; publish?: boolean | undefined } | undefined;
}
export interface UpdateInput {
  status?: EventStatus | undefined;
  body: string;
  publish?: boolean | undefined;
}

/**
 * Status pages: each page belongs to one user, its owner; administrators manage
 * every page. The public summary carries published data only: incidents and maintenances appear
 * once one of their updates is published, draft updates, internal notes and the audit trail never.
 * Every management change is written to `status_audit` in the same transaction.
 */
export class StatusPageService {
  constructor(
    private readonly orm: Orm,
    private readonly publicBaseUrl: string,
  ) {}

  private get knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  private async rows<T>(db: Knex | Knex.Transaction, sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
    const { rows } = await db.raw<{ rows: T[] }>(sql, bindings as Knex.RawBinding[]);
    return rows;
  }

  publicUrl(slug: string) {
    return `${this.publicBaseUrl.replace(/\/$/, '')}/status/${encodeURIComponent(slug)}`;
  }

  // ---- pages -----------------------------------------------------------------------------------------

  async listPages(user: AuthUser) {
    const pages = await this.rows<PageRow>(
      this.knex,
      `select p.*, u.username as owner from status_pages p join users u on u.id = p.owner_id
        where ? or p.owner_id = ? order by p.slug`,
      [user.isAdmin, user.id],
    );
    return pages.map((p) => this.presentPage(p));
  }

  private presentPage(p: PageRow) {
    return {
      id: Number(p.id),
      slug: p.slug,
      name: p.name,
      time_zone: p.time_zone,
      owner: p.owner ?? '',
      public_url: this.publicUrl(p.slug),
      created_at: isoOf(p.created_at),
      updated_at: isoOf(p.updated_at),
    };
  }

  /** A page the user may manage: their own, or any for an administrator; otherwise 404 (existence is not told). */
  private async ownPage(db: Knex | Knex.Transaction, user: AuthUser, pageId: number): Promise<PageRow> {
    const [page] = await this.rows<PageRow>(
      db,
      `select p.*, u.username as owner from status_pages p join users u on u.id = p.owner_id where p.id = ? and (? or p.owner_id = ?)`,
      [pageId, user.isAdmin, user.id],
    );
    if (!page) throw notFound('Status page not found.');
    return page;
  }

  private async audit(db: Knex.Transaction, page: PageRow, user: AuthUser, action: string, target: string | null, detail: Record<string, unknown> = {}) {
    await db.raw('insert into status_audit (page_id, page_slug, actor_id, actor, action, target, detail) values (?, ?, ?, ?, ?, ?, ?::jsonb)', [
      page.id,
      page.slug,
      user.id,
      user.username,
      action,
      target,
      JSON.stringify(detail),
    ]);
  }

  private touch(db: Knex.Transaction, pageId: number) {
    return db.raw('update status_pages set updated_at = now() where id = ?', [pageId]);
  }

  async createPage(user: AuthUser, input: PageInput) {
    checkTimeZone(input.time_zone);
    return this.knex.transaction(async (trx) => {
      let page: PageRow;
      try {
        [page] = (await this.rows<PageRow>(trx, 'insert into status_pages (owner_id, slug, name, time_zone) values (?, ?, ?, ?) returning *', [
          user.id,
          input.slug,
          input.name,
          input.time_zone,
        ])) as [PageRow];
      } catch (err) {
        throw slugTaken(err, input.slug);
      }
      await this.audit(trx, page, user, 'page.create', `page:${page.id}`, { slug: input.slug, name: input.name });
      return this.presentPage({ ...page, owner: user.username });
    });
  }

  async updatePage(user: AuthUser, pageId: number, patch: Partial<Omit<PageInput, 'slug'>>) {
    if (patch.time_zone !== undefined) checkTimeZone(patch.time_zone);
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      const [updated] = (await this.rows<PageRow>(trx, 'update status_pages set name = ?, time_zone = ?, updated_at = now() where id = ? returning *', [
        patch.name ?? page.name,
        patch.time_zone ?? page.time_zone,
        page.id,
      ])) as [PageRow];
      await this.audit(trx, page, user, 'page.update', `page:${page.id}`, { ...patch });
      return this.presentPage({ ...updated, owner: page.owner ?? '' });
    });
  }

  async deletePage(user: AuthUser, pageId: number) {
    await this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      await this.audit(trx, page, user, 'page.delete', `page:${page.id}`, { slug: page.slug });
      await trx.raw('delete from status_pages where id = ?', [page.id]);
    });
  }

  /** Everything about one page for its managers: drafts, internal notes and the latest audit entries included. */
  async managedPage(user: AuthUser, pageId: number) {
    const page = await this.ownPage(this.knex, user, pageId);
    const [components, incidents, updates, audit] = await Promise.all([
      this.rows<ComponentRow>(this.knex, 'select * from status_components where page_id = ? order by position, id', [page.id]),
      this.rows<IncidentRow>(this.knex, 'select * from status_incidents where page_id = ? order by created_at desc, id desc', [page.id]),
      this.rows<UpdateRow>(
        this.knex,
        'select u.* from status_incident_updates u join status_incidents i on i.id = u.incident_id where i.page_id = ? order by u.created_at desc, u.id desc',
        [page.id],
      ),
      this.rows<AuditRow>(this.knex, 'select id, actor, action, target, detail, at from status_audit where page_id = ? order by at desc, id desc limit 200', [
        page.id,
      ]),
    ]);
    return {
      page: this.presentPage(page),
      components: components.map(presentManagedComponent),
      incidents: incidents.map((i) => ({
        ...presentManagedIncident(i),
        updates: updates.filter((u) => Number(u.incident_id) === Number(i.id)).map(presentManagedUpdate),
      })),
      audit: audit.map((a) => ({ id: Number(a.id), actor: a.actor, action: a.action, target: a.target, detail: a.detail, at: isoOf(a.at) })),
    };
  }

  // ---- components --------------------------------------------------------------------------------------

  private async checkGroup(db: Knex.Transaction, pageId: number, groupId: number | null | undefined, self?: ComponentRow) {
    if (groupId === null || groupId === undefined) return;
    if (self?.is_group) throw validationFailed({ group_id: ['a group cannot belong to another group'] });
    const [group] = await this.rows<ComponentRow>(db, 'select * from status_components where id = ? and page_id = ? and is_group', [groupId, pageId]);
    if (!group) throw validationFailed({ group_id: [`no component group ${groupId} on this page`] });
  }

  async addComponent(user: AuthUser, pageId: number, input: ComponentInput) {
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      if (input.group && input.group_id != null) throw validationFailed({ group_id: ['a group cannot belong to another group'] });
      await this.checkGroup(trx, page.id, input.group_id);
      const [c] = (await this.rows<ComponentRow>(
        trx,
        `insert into status_components (page_id, group_id, is_group, name, description, status, position)
         values (?, ?, ?, ?, ?, ?, coalesce(?, (select coalesce(max(position), 0) + 1 from status_components where page_id = ?))) returning *`,
        [
          page.id,
          input.group_id ?? null,
          input.group ?? false,
          input.name,
          input.description ?? null,
          input.status ?? 'operational',
          input.position ?? null,
          page.id,
        ],
      )) as [ComponentRow];
      await this.audit(trx, page, user, input.group ? 'group.create' : 'component.create', `component:${c.id}`, { name: c.name, status: c.status });
      await this.touch(trx, page.id);
      return presentManagedComponent(c);
    });
  }

  async updateComponent(user: AuthUser, pageId: number, componentId: number, patch: Partial<ComponentInput>) {
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      const [current] = await this.rows<ComponentRow>(trx, 'select * from status_components where id = ? and page_id = ? for update', [componentId, page.id]);
      if (!current) throw notFound('Component not found.');
      if (patch.group_id !== undefined) await this.checkGroup(trx, page.id, patch.group_id, current);
      const [c] = (await this.rows<ComponentRow>(
        trx,
        `update status_components set name = ?, description = ?, status = ?, group_id = ?, position = ?, updated_at = now() where id = ? returning *`,
        [
          patch.name ?? current.name,
          patch.description !== undefined ? patch.description : current.description,
          patch.status ?? current.status,
          patch.group_id !== undefined ? patch.group_id : current.group_id,
          patch.position ?? current.position,
          current.id,
        ],
      )) as [ComponentRow];
      const changed = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
      await this.audit(trx, page, user, patch.status && patch.status !== current.status ? 'component.status' : 'component.update', `component:${c.id}`, {
        ...changed,
        ...(patch.status ? { from: current.status } : {}),
      });
      await this.touch(trx, page.id);
      return presentManagedComponent(c);
    });
  }

  async deleteComponent(user: AuthUser, pageId: number, componentId: number) {
    await this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      const [c] = await this.rows<ComponentRow>(trx, 'delete from status_components where id = ? and page_id = ? returning *', [componentId, page.id]);
      if (!c) throw notFound('Component not found.');
      await trx.raw('update status_incidents set component_ids = array_remove(component_ids, ?) where page_id = ?', [c.id, page.id]);
      await this.audit(trx, page, user, 'component.delete', `component:${c.id}`, { name: c.name });
      await this.touch(trx, page.id);
    });
  }

  // ---- incidents and maintenances ----------------------------------------------------------------------

  private async checkComponents(db: Knex.Transaction, pageId: number, ids: number[] | undefined) {
    if (!ids?.length) return;
    const found = await this.rows<{ id: number }>(db, 'select id from status_components where page_id = ? and id = any(?::int[])', [pageId, ids]);
    const missing = ids.filter((id) => !found.some((f) => Number(f.id) === id));
    if (missing.length) throw validationFailed({ component_ids: [`no component ${missing.join(', ')} on this page`] });
  }

  async createIncident(user: AuthUser, pageId: number, input: IncidentInput) {
    const status = input.status ?? (input.kind === 'incident' ? 'investigating' : 'scheduled');
    checkStatusForKind(input.kind, status, 'status');
    const errors: Record<string, string[]> = {};
    if (input.kind === 'maintenance') {
      if (!input.scheduled_for) errors.scheduled_for = ['a maintenance needs scheduled_for'];
      if (!input.scheduled_until) errors.scheduled_until = ['a maintenance needs scheduled_until'];
      if (input.scheduled_for && input.scheduled_until && Date.parse(input.scheduled_until) <= Date.parse(input.scheduled_for))
        errors.scheduled_until = ['must be after scheduled_for'];
      if (input.impact && input.impact !== 'maintenance') errors.impact = ['a maintenance has impact "maintenance"'];
    } else if (input.impact === 'maintenance') errors.impact = ['an incident has impact none, minor, major or critical'];
    if (Object.keys(errors).length) throw validationFailed(errors);
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      await this.checkComponents(trx, page.id, input.component_ids);
      const [i] = (await this.rows<IncidentRow>(
        trx,
        `insert into status_incidents (page_id, kind, name, status, impact, component_ids, internal_notes, scheduled_for, scheduled_until)
         values (?, ?, ?, ?, ?, ?::int[], ?, ?, ?) returning *`,
        [
          page.id,
          input.kind,
          input.name,
          status,
          input.impact ?? (input.kind === 'maintenance' ? 'maintenance' : 'minor'),
          input.component_ids ?? [],
          input.internal_notes ?? '',
          input.scheduled_for ?? null,
          input.scheduled_until ?? null,
        ],
      )) as [IncidentRow];
      await this.audit(trx, page, user, `${input.kind}.create`, `incident:${i.id}`, { name: i.name, status, impact: i.impact });
      const updates = input.update ? [await this.insertUpdate(trx, page, user, i, { status, body: input.update.body, publish: input.update.publish })] : [];
      const [fresh] = (await this.rows<IncidentRow>(trx, 'select * from status_incidents where id = ?', [i.id])) as [IncidentRow];
      return { ...presentManagedIncident(fresh), updates };
    });
  }

  async updateIncident(
    user: AuthUser,
    pageId: number,
    incidentId: number,
    patch: Partial<Pick<IncidentInput, 'name' | 'impact' | 'component_ids' | 'internal_notes'>>,
  ) {
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      const [current] = await this.rows<IncidentRow>(trx, 'select * from status_incidents where id = ? and page_id = ? for update', [incidentId, page.id]);
      if (!current) throw notFound('Incident not found.');
      if (patch.impact && (current.kind === 'maintenance') !== (patch.impact === 'maintenance'))
        throw validationFailed({
          impact: [current.kind === 'maintenance' ? 'a maintenance has impact "maintenance"' : 'an incident cannot have impact "maintenance"'],
        });
      await this.checkComponents(trx, page.id, patch.component_ids);
      const [i] = (await this.rows<IncidentRow>(
        trx,
        'update status_incidents set name = ?, impact = ?, component_ids = ?::int[], internal_notes = ?, updated_at = now() where id = ? returning *',
        [
          patch.name ?? current.name,
          patch.impact ?? current.impact,
          patch.component_ids ?? current.component_ids,
          patch.internal_notes ?? current.internal_notes,
          current.id,
        ],
      )) as [IncidentRow];
      // The notes themselves stay out of the audit detail: only that they changed.
      await this.audit(trx, page, user, `${current.kind}.update`, `incident:${i.id}`, {
        ...(patch.name ? { name: patch.name } : {}),
        ...(patch.impact ? { impact: patch.impact } : {}),
        ...(patch.component_ids ? { component_ids: patch.component_ids } : {}),
        ...(patch.internal_notes !== undefined ? { internal_notes: 'changed' } : {}),
      });
      return presentManagedIncident(i);
    });
  }

  private async insertUpdate(trx: Knex.Transaction, page: PageRow, user: AuthUser, incident: IncidentRow, input: UpdateInput) {
    const status = input.status ?? incident.status;
    checkStatusForKind(incident.kind, status, 'status');
    const [u] = (await this.rows<UpdateRow>(
      trx,
      'insert into status_incident_updates (incident_id, status, body, published_at) values (?, ?, ?, case when ? then now() else null end) returning *',
      [incident.id, status, input.body, input.publish ?? false],
    )) as [UpdateRow];
    await this.audit(trx, page, user, input.publish ? 'update.publish' : 'update.draft', `update:${u.id}`, { incident_id: incident.id, status });
    if (input.publish) await this.applyPublished(trx, page, incident.id, status);
    return presentManagedUpdate(u);
  }

  /** A published update moves its incident to the update's status (resolved/completed close it). */
  private async applyPublished(trx: Knex.Transaction, page: PageRow, incidentId: number, status: EventStatus) {
    await trx.raw(
      `update status_incidents set status = ?, updated_at = now(),
              resolved_at = case when ? in ('resolved', 'completed') then coalesce(resolved_at, now()) else null end where id = ?`,
      [status, status, incidentId],
    );
    await this.touch(trx, page.id);
  }

  async addUpdate(user: AuthUser, pageId: number, incidentId: number, input: UpdateInput) {
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      const [incident] = await this.rows<IncidentRow>(trx, 'select * from status_incidents where id = ? and page_id = ? for update', [incidentId, page.id]);
      if (!incident) throw notFound('Incident not found.');
      return this.insertUpdate(trx, page, user, incident, input);
    });
  }

  async publishUpdate(user: AuthUser, pageId: number, incidentId: number, updateId: number) {
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      const [u] = await this.rows<UpdateRow>(
        trx,
        `select u.* from status_incident_updates u join status_incidents i on i.id = u.incident_id
          where u.id = ? and u.incident_id = ? and i.page_id = ? for update of u`,
        [updateId, incidentId, page.id],
      );
      if (!u) throw notFound('Update not found.');
      if (u.published_at) throw new AppError('conflict', 'This update is already published.');
      const [published] = (await this.rows<UpdateRow>(
        trx,
        'update status_incident_updates set published_at = now(), updated_at = now() where id = ? returning *',
        [u.id],
      )) as [UpdateRow];
      await this.audit(trx, page, user, 'update.publish', `update:${u.id}`, { incident_id: incidentId, status: u.status });
      await this.applyPublished(trx, page, incidentId, u.status);
      return presentManagedUpdate(published);
    });
  }

  async auditLog(user: AuthUser, pageId: number) {
    return (await this.managedPage(user, pageId)).audit;
  }

  // ---- public ------------------------------------------------------------------------------------------

  /** The public summary of the page `slug`: published data only. */
  async summary(slug: string): Promise<Summary> {
    const [page] = await this.rows<PageRow>(this.knex, 'select * from status_pages where slug = ?', [slug]);
    if (!page) throw notFound('Status page not found.');
    const [components, events, updates] = await Promise.all([
      this.rows<ComponentRow>(this.knex, 'select * from status_components where page_id = ? order by position, id', [page.id]),
      // Open incidents, and maintenances that are upcoming or under way, with at least one published update.
      this.rows<IncidentRow>(
        this.knex,
        `select i.* from status_incidents i
          where i.page_id = ? and exists (select 1 from status_incident_updates u where u.incident_id = i.id and u.published_at is not null)
            and ((i.kind = 'incident' and i.status <> 'resolved')
              or (i.kind = 'maintenance' and (i.status in ('in_progress', 'verifying') or (i.status = 'scheduled' and i.scheduled_until > now()))))
          order by coalesce(i.scheduled_for, i.created_at), i.id`,
        [page.id],
      ),
      this.rows<UpdateRow>(
        this.knex,
        `select u.* from status_incident_updates u join status_incidents i on i.id = u.incident_id
          where i.page_id = ? and u.published_at is not null order by u.published_at desc, u.id desc`,
        [page.id],
      ),
    ]);
    return summaryOf({ page, components, events, updates, url: this.publicUrl(page.slug) });
  }
}

const presentManagedComponent = (c: ComponentRow) => ({
  id: Number(c.id),
  name: c.name,
  description: c.description,
  status: c.status,
  group: c.is_group,
  group_id: c.group_id === null ? null : Number(c.group_id),
  position: c.position,
  created_at: isoOf(c.created_at),
  updated_at: isoOf(c.updated_at),
});

const presentManagedIncident = (i: IncidentRow) => ({
  id: Number(i.id),
  kind: i.kind,
  name: i.name,
  status: i.status,
  impact: i.impact,
  component_ids: i.component_ids.map(Number),
  internal_notes: i.internal_notes,
  scheduled_for: iso(i.scheduled_for),
  scheduled_until: iso(i.scheduled_until),
  resolved_at: iso(i.resolved_at),
  created_at: isoOf(i.created_at),
  updated_at: isoOf(i.updated_at),
});

const presentManagedUpdate = (u: UpdateRow) => ({
  id: Number(u.id),
  incident_id: Number(u.incident_id),
  status: u.status,
  body: u.body,
  state: u.published_at ? ('published' as const) : ('draft' as const),
  published_at: iso(u.published_at),
  created_at: isoOf(u.created_at),
});

function checkStatusForKind(kind: EventKind, status: EventStatus, field: string) {
  const allowed: readonly string[] = kind === 'incident' ? INCIDENT_STATUSES : MAINTENANCE_STATUSES;
  if (!allowed.includes(status))
    throw validationFailed({ [field]: [`a${kind === 'incident' ? 'n incident' : ' maintenance'} status is one of ${allowed.join(', ')}`] });
}

function checkTimeZone(tz: string) {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
  } catch {
    throw validationFailed({ time_zone: [`unknown IANA time zone "${tz}"`] });
  }
}

export function slugTaken(err: unknown, slug: string): unknown {
  if ((err as { code?: string }).code === '23505') {
    return validationFailed({ slug: [`the slug "${slug}" is taken`] });
  }
  return err;
}
