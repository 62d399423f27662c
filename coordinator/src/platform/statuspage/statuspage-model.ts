/** The status-page domain's vocabularies and table rows, shared by the service and the public summary. */
export const COMPONENT_STATUSES = ['operational', 'degraded_performance', 'partial_outage', 'major_outage', 'under_maintenance'] as const;
export type ComponentStatus = (typeof COMPONENT_STATUSES)[number];
export const INCIDENT_STATUSES = ['investigating', 'identified', 'monitoring', 'resolved'] as const;
export const MAINTENANCE_STATUSES = ['scheduled', 'in_progress', 'verifying', 'completed'] as const;
export const EVENT_STATUSES = [...INCIDENT_STATUSES, ...MAINTENANCE_STATUSES] as const;
export type EventStatus = (typeof EVENT_STATUSES)[number];
export const IMPACTS = ['none', 'minor', 'major', 'critical', 'maintenance'] as const;
export type Impact = (typeof IMPACTS)[number];
export type Indicator = 'none' | 'minor' | 'major' | 'critical' | 'maintenance';
export type EventKind = 'incident' | 'maintenance';

export interface PageRow {
  id: number;
  owner_id: number;
  slug: string;
  name: string;
  time_zone: string;
  created_at: Date;
  updated_at: Date;
  owner?: string;
}
export interface ComponentRow {
  id: number;
  page_id: number;
  group_id: number | null;
  is_group: boolean;
  name: string;
  description: string | null;
  status: ComponentStatus;
  position: number;
  created_at: Date;
  updated_at: Date;
}
export interface IncidentRow {
  id: number;
  page_id: number;
  kind: EventKind;
  name: string;
  status: EventStatus;
  impact: Impact;
  component_ids: number[];
  internal_notes: string;
  scheduled_for: Date | null;
  scheduled_until: Date | null;
  resolved_at: Date | null;
  created_at: Date;
  updated_at: Date;
}
export interface UpdateRow {
  id: number;
  incident_id: number;
  status: EventStatus;
  body: string;
  published_at: Date | null;
  created_at: Date;
  updated_at: Date;
}
export interface AuditRow {
  id: string;
  actor: string;
  action: string;
  target: string | null;
  detail: Record<string, unknown>;
  at: Date;
}

export const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);
export const isoOf = (d: Date) => new Date(d).toISOString();
