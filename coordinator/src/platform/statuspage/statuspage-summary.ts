import {
  type ComponentRow,
  type ComponentStatus,
  type EventStatus,
  type Impact,
  type IncidentRow,
  type Indicator,
  type PageRow,
  type UpdateRow,
  iso,
  isoOf,
} from './statuspage-model.js';

/** Worst first: the order used for a group's status and the page indicator. */
const COMPONENT_RANK: Record<ComponentStatus, number> = {
  operational: 0,
  under_maintenance: 1,
  degraded_performance: 2,
  partial_outage: 3,
  major_outage: 4,
};
const INDICATOR_RANK: Record<Indicator, number> = { none: 0, maintenance: 1, minor: 2, major: 3, critical: 4 };
const COMPONENT_INDICATOR: Record<ComponentStatus, Indicator> = {
  operational: 'none',
  under_maintenance: 'maintenance',
  degraded_performance: 'minor',
  partial_outage: 'major',
  major_outage: 'critical',
};
export const INDICATOR_DESCRIPTION: Record<Indicator, string> = {
  none: 'All Systems Operational',
  minor: 'Minor Service Outage',
  major: 'Partial System Outage',
  critical: 'Major Service Outage',
  maintenance: 'Service Under Maintenance',
};

/** The public summary of one page (Statuspage summary.json shape). */
export interface Summary {
  page: { id: string; name: string; url: string; time_zone: string; updated_at: string };
  status: { indicator: Indicator; description: string };
  components: PublicComponent[];
  incidents: PublicIncident[];
  scheduled_maintenances: PublicIncident[];
}
export interface PublicComponent {
  id: string;
  name: string;
  status: ComponentStatus;
  description: string | null;
  position: number;
  group_id: string | null;
  group: boolean;
  components?: string[];
  page_id: string;
  showcase: boolean;
  only_show_if_degraded: boolean;
  created_at: string;
  updated_at: string;
}
export interface PublicIncident {
  id: string;
  name: string;
  status: EventStatus;
  impact: Impact;
  shortlink: string;
  page_id: string;
  created_at: string;
  started_at: string;
  updated_at: string;
  monitoring_at: string | null;
  resolved_at: string | null;
  scheduled_for?: string | null;
  scheduled_until?: string | null;
  incident_updates: Array<{ id: string; incident_id: string; status: EventStatus; body: string; created_at: string; updated_at: string; display_at: string }>;
  components: Array<{ id: string; name: string; status: ComponentStatus }>;
}

/**
 * The public summary (Statuspage summary.json shape) of one page from its rows: the components
 * (a group has its worst member's status), the open incidents and current maintenances with their
 * published updates, and the page indicator (the worst of both).
 */
export function summaryOf({
  page,
  components,
  events,
  updates,
  url,
}: {
  page: PageRow;
  components: ComponentRow[];
  /** Open incidents and current maintenances that have a published update. */
  events: IncidentRow[];
  /** The page's published updates, newest first. */
  updates: UpdateRow[];
  /** The page's public URL. */
  url: string;
}): Summary {
  const pageId = page.slug;
  const byId = new Map(components.map((c) => [Number(c.id), c]));
  const children = (g: ComponentRow) => components.filter((c) => Number(c.group_id) === Number(g.id) && !c.is_group);
  const statusOf = (c: ComponentRow): ComponentStatus =>
    c.is_group ? children(c).reduce<ComponentStatus>((w, x) => (COMPONENT_RANK[x.status] > COMPONENT_RANK[w] ? x.status : w), 'operational') : c.status;

  const publicComponents: PublicComponent[] = components.map((c) => ({
    id: String(c.id),
    name: c.name,
    status: statusOf(c),
    description: c.description,
    position: c.position,
    group_id: c.group_id === null ? null : String(c.group_id),
    group: c.is_group,
    ...(c.is_group ? { components: children(c).map((x) => String(x.id)) } : {}),
    page_id: pageId,
    showcase: true,
    only_show_if_degraded: false,
    created_at: isoOf(c.created_at),
    updated_at: isoOf(c.updated_at),
  }));

  const presentEvent = (i: IncidentRow): PublicIncident => {
    const published = updates.filter((u) => Number(u.incident_id) === Number(i.id));
    const first = published.at(-1)!;
    const monitoring = published.filter((u) => u.status === 'monitoring').at(-1);
    return {
      id: String(i.id),
      name: i.name,
      status: i.status,
      impact: i.impact,
      shortlink: `${url}#incident-${i.id}`,
      page_id: pageId,
      created_at: isoOf(first.published_at!),
      started_at: isoOf(first.published_at!),
      // Only the published updates date the incident: edits of internal notes stay invisible.
      updated_at: isoOf(published[0]!.published_at!),
      monitoring_at: iso(monitoring?.published_at),
      resolved_at: null,
      ...(i.kind === 'maintenance' ? { scheduled_for: iso(i.scheduled_for), scheduled_until: iso(i.scheduled_until) } : {}),
      incident_updates: published.map((u) => ({
        id: String(u.id),
        incident_id: String(i.id),
        status: u.status,
        body: u.body,
        created_at: isoOf(u.published_at!),
        updated_at: isoOf(u.published_at!),
        display_at: isoOf(u.published_at!),
      })),
      components: i.component_ids
        .map((id) => byId.get(Number(id)))
        .filter((c): c is ComponentRow => c !== undefined)
        .map((c) => ({ id: String(c.id), name: c.name, status: statusOf(c) })),
    };
  };
  const incidents = events.filter((e) => e.kind === 'incident').map(presentEvent);
  const maintenances = events.filter((e) => e.kind === 'maintenance').map(presentEvent);

  let indicator: Indicator = 'none';
  const worse = (x: Indicator) => {
    if (INDICATOR_RANK[x] > INDICATOR_RANK[indicator]) indicator = x;
  };
  for (const i of incidents) worse(i.impact === 'maintenance' ? 'none' : i.impact);
  for (const c of components) if (!c.is_group) worse(COMPONENT_INDICATOR[c.status]);
  if (maintenances.some((m) => m.status === 'in_progress' || m.status === 'verifying')) worse('maintenance');

  const times = [page.updated_at, ...components.map((c) => c.updated_at), ...updates.map((u) => u.published_at!)].map((d) => new Date(d).getTime());
  return {
    page: { id: pageId, name: page.name, url, time_zone: page.time_zone, updated_at: new Date(Math.max(...times)).toISOString() },
    status: { indicator, description: INDICATOR_DESCRIPTION[indicator] },
    components: publicComponents,
    incidents,
    scheduled_maintenances: maintenances,
  };
}
