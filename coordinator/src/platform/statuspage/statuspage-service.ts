import type { Knex } from '@mikro-orm/postgresql';
import type { AuthUser } from '../../accounts/types.js';
import type { Orm } from '../../db/orm.js';
import { dbOf } from '../../db/sql.js';
import { StatusPages as S } from './statuspage-repository.js';
import { AppError, notFound, validationFailed } from '../../http/errors.js';
import { summaryOf, type Summary } from './statuspage-summary.js';
import {
  INCIDENT_STATUSES,
  MAINTENANCE_STATUSES,
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
    return dbOf(this.orm.em);
  }

  publicUrl(slug: string) {
    return `${this.publicBaseUrl.replace(/\/$/, '')}/status/${encodeURIComponent(slug)}`;
  }

  // ---- pages -----------------------------------------------------------------------------------------

  async listPages(user: AuthUser) {
    const pages = await S.listFor.rows(this.knex, { isAdmin: user.isAdmin, userId: user.id });
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
    const page = await S.managed.first(db, { pageId, isAdmin: user.isAdmin, userId: user.id });
    if (!page) throw notFound('Status page not found.');
    return page;
  }

  private async audit(db: Knex.Transaction, page: PageRow, user: AuthUser, action: string, target: string | null, detail: Record<string, unknown> = {}) {
    await S.audit.run(db, { pageId: page.id, slug: page.slug, actorId: user.id, actor: user.username, action, target, detail: JSON.stringify(detail) });
  }

  private touch(db: Knex.Transaction, pageId: number) {
    return S.touch.run(db, { id: pageId });
  }

  async createPage(user: AuthUser, input: PageInput) {
    checkTimeZone(input.time_zone);
    return this.knex.transaction(async (trx) => {
      let page: PageRow;
      try {
        page = (await S.create.first(trx, { ownerId: user.id, slug: input.slug, name: input.name, timeZone: input.time_zone }))!;
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
      const updated = (await S.update.first(trx, { id: page.id, name: patch.name ?? page.name, timeZone: patch.time_zone ?? page.time_zone }))!;
      await this.audit(trx, page, user, 'page.update', `page:${page.id}`, { ...patch });
      return this.presentPage({ ...updated, owner: page.owner ?? '' });
    });
  }

  async deletePage(user: AuthUser, pageId: number) {
    await this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      await this.audit(trx, page, user, 'page.delete', `page:${page.id}`, { slug: page.slug });
      await S.remove.run(trx, { id: page.id });
    });
  }

  /** Everything about one page for its managers: drafts, internal notes and the latest audit entries included. */
  async managedPage(user: AuthUser, pageId: number) {
    const page = await this.ownPage(this.knex, user, pageId);
    const [components, incidents, updates, audit] = await Promise.all([
      S.components.rows(this.knex, { pageId: page.id }),
      S.incidents.rows(this.knex, { pageId: page.id }),
      S.updates.rows(this.knex, { pageId: page.id }),
      S.auditOf.rows(this.knex, { pageId: page.id }),
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
    const group = await S.group.first(db, { id: groupId, pageId });
    if (!group) throw validationFailed({ group_id: [`no component group ${groupId} on this page`] });
  }

  async addComponent(user: AuthUser, pageId: number, input: ComponentInput) {
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      if (input.group && input.group_id != null) throw validationFailed({ group_id: ['a group cannot belong to another group'] });
      await this.checkGroup(trx, page.id, input.group_id);
      const c = (await S.addComponent.first(trx, {
        pageId: page.id,
        groupId: input.group_id ?? null,
        isGroup: input.group ?? false,
        name: input.name,
        description: input.description ?? null,
        status: input.status ?? 'operational',
        position: input.position ?? null,
      }))!;
      await this.audit(trx, page, user, input.group ? 'group.create' : 'component.create', `component:${c.id}`, { name: c.name, status: c.status });
      await this.touch(trx, page.id);
      return presentManagedComponent(c);
    });
  }

  async updateComponent(user: AuthUser, pageId: number, componentId: number, patch: Partial<ComponentInput>) {
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      const current = await S.componentForUpdate.first(trx, { id: componentId, pageId: page.id });
      if (!current) throw notFound('Component not found.');
      if (patch.group_id !== undefined) await this.checkGroup(trx, page.id, patch.group_id, current);
      const c = (await S.updateComponent.first(trx, {
        name: patch.name ?? current.name,
        description: patch.description !== undefined ? patch.description : current.description,
        status: patch.status ?? current.status,
        groupId: patch.group_id !== undefined ? patch.group_id : current.group_id,
        position: patch.position ?? current.position,
        id: current.id,
      }))!;
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
      const c = await S.removeComponent.first(trx, { id: componentId, pageId: page.id });
      if (!c) throw notFound('Component not found.');
      await S.unlinkComponent.run(trx, { id: c.id, pageId: page.id });
      await this.audit(trx, page, user, 'component.delete', `component:${c.id}`, { name: c.name });
      await this.touch(trx, page.id);
    });
  }

  // ---- incidents and maintenances ----------------------------------------------------------------------

  private async checkComponents(db: Knex.Transaction, pageId: number, ids: number[] | undefined) {
    if (!ids?.length) return;
    const found = await S.componentIds.rows(db, { pageId, ids });
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
      const i = (await S.addIncident.first(trx, {
        pageId: page.id,
        kind: input.kind,
        name: input.name,
        status,
        impact: input.impact ?? (input.kind === 'maintenance' ? 'maintenance' : 'minor'),
        componentIds: input.component_ids ?? [],
        internalNotes: input.internal_notes ?? '',
        scheduledFor: input.scheduled_for ?? null,
        scheduledUntil: input.scheduled_until ?? null,
      }))!;
      await this.audit(trx, page, user, `${input.kind}.create`, `incident:${i.id}`, { name: i.name, status, impact: i.impact });
      const updates = input.update ? [await this.insertUpdate(trx, page, user, i, { status, body: input.update.body, publish: input.update.publish })] : [];
      const fresh = (await S.incident.first(trx, { id: i.id }))!;
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
      const current = await S.incidentForUpdate.first(trx, { id: incidentId, pageId: page.id });
      if (!current) throw notFound('Incident not found.');
      if (patch.impact && (current.kind === 'maintenance') !== (patch.impact === 'maintenance'))
        throw validationFailed({
          impact: [current.kind === 'maintenance' ? 'a maintenance has impact "maintenance"' : 'an incident cannot have impact "maintenance"'],
        });
      await this.checkComponents(trx, page.id, patch.component_ids);
      const i = (await S.updateIncident.first(trx, {
        name: patch.name ?? current.name,
        impact: patch.impact ?? current.impact,
        componentIds: patch.component_ids ?? current.component_ids,
        internalNotes: patch.internal_notes ?? current.internal_notes,
        id: current.id,
      }))!;
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
    const u = (await S.addUpdate.first(trx, { incidentId: incident.id, status, body: input.body, publish: input.publish ?? false }))!;
    await this.audit(trx, page, user, input.publish ? 'update.publish' : 'update.draft', `update:${u.id}`, { incident_id: incident.id, status });
    if (input.publish) await this.applyPublished(trx, page, incident.id, status);
    return presentManagedUpdate(u);
  }

  /** A published update moves its incident to the update's status (resolved/completed close it). */
  private async applyPublished(trx: Knex.Transaction, page: PageRow, incidentId: number, status: EventStatus) {
    await S.applyPublished.run(trx, { id: incidentId, status });
    await this.touch(trx, page.id);
  }

  async addUpdate(user: AuthUser, pageId: number, incidentId: number, input: UpdateInput) {
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      const incident = await S.incidentForUpdate.first(trx, { id: incidentId, pageId: page.id });
      if (!incident) throw notFound('Incident not found.');
      return this.insertUpdate(trx, page, user, incident, input);
    });
  }

  async publishUpdate(user: AuthUser, pageId: number, incidentId: number, updateId: number) {
    return this.knex.transaction(async (trx) => {
      const page = await this.ownPage(trx, user, pageId);
      const u = await S.updateForPublish.first(trx, { id: updateId, incidentId, pageId: page.id });
      if (!u) throw notFound('Update not found.');
      if (u.published_at) throw new AppError('conflict', 'This update is already published.');
      const published = (await S.publish.first(trx, { id: u.id }))!;
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
    const page = await S.bySlug.first(this.knex, { slug });
    if (!page) throw notFound('Status page not found.');
    const [components, events, updates] = await Promise.all([
      S.components.rows(this.knex, { pageId: page.id }),
      S.publicEvents.rows(this.knex, { pageId: page.id }),
      S.publishedUpdates.rows(this.knex, { pageId: page.id }),
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
