import { z } from 'zod';
import { safeString, idParam } from '@sonar/shared';
import { COMPONENT_STATUSES, EVENT_STATUSES, IMPACTS } from './statuspage-model.js';

export const slugSchema = z
  .string()
  .min(2)
  .max(64)
  .regex(/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/, 'lower-case letters, digits and inner hyphens');

const maxId = idParam();
export const pageParams = z.object({ id: maxId });
export const componentParams = z.object({ id: maxId, componentId: maxId });
export const incidentParams = z.object({ id: maxId, incidentId: maxId });
export const updateParams = z.object({ id: maxId, incidentId: maxId, updateId: maxId });
export const slugParams = z.object({ slug: slugSchema });

const componentStatus = z.enum(COMPONENT_STATUSES);
const eventStatus = z.enum(EVENT_STATUSES);
const impact = z.enum(IMPACTS);

// ---- management bodies ----------------------------------------------------------------------------------

export const pageBody = z.object({
  slug: slugSchema.describe('Public address: /status/{slug} and /api/statuspage/{slug}'),
  name: safeString().trim().min(1).max(200),
  time_zone: z.string().max(64).default('Etc/UTC').describe('IANA time zone the public page shows times in'),
});

export const componentBody = z.object({
  name: safeString().trim().min(1).max(200),
  description: safeString({ multiline: true }).max(2000).nullish(),
  status: componentStatus.optional(),
  group: z.boolean().optional().describe('Create a component group (its status is the worst of its components)'),
  group_id: z.number().int().positive().max(2_147_483_647).nullish().describe('The group this component belongs to'),
  position: z.number().int().min(0).max(100_000).optional(),
});

export const componentPatch = componentBody.omit({ group: true }).partial();

const isoDate = z.iso.datetime({ offset: true });

export const updateBody = z.object({
  status: eventStatus.optional().describe("The incident's status once this update is published (default: its current status)"),
  body: safeString({ multiline: true }).trim().min(1).max(10_000),
  publish: z.boolean().optional().describe('Publish at once; otherwise a draft, invisible until published'),
});

export const incidentBody = z.object({
  kind: z.enum(['incident', 'maintenance']).default('incident'),
  name: safeString().trim().min(1).max(200),
  status: eventStatus.optional().describe('Incidents: investigating|identified|monitoring|resolved; maintenances: scheduled|in_progress|verifying|completed'),
  impact: impact.optional(),
  component_ids: z.array(z.number().int().positive()).max(200).optional(),
  internal_notes: safeString({ multiline: true }).max(10_000).optional().describe('Never public'),
  scheduled_for: isoDate.optional().describe('Maintenances: start'),
  scheduled_until: isoDate.optional().describe('Maintenances: end'),
  update: updateBody.omit({ status: true }).optional().describe('A first update (draft unless `publish`)'),
});

export const incidentPatch = z.object({
  name: safeString().trim().min(1).max(200).optional(),
  impact: impact.optional(),
  component_ids: z.array(z.number().int().positive()).max(200).optional(),
  internal_notes: safeString({ multiline: true }).max(10_000).optional(),
});

// ---- management answers -------------------------------------------------------------------------------

export const managedPageSchema = z.object({
  id: z.number().int(),
  slug: z.string(),
  name: z.string(),
  time_zone: z.string(),
  owner: z.string(),
  public_url: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});

export const managedComponentSchema = z.object({
  id: z.number().int(),
  name: z.string(),
  description: z.string().nullable(),
  status: componentStatus,
  group: z.boolean(),
  group_id: z.number().int().nullable(),
  position: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});

export const managedUpdateSchema = z.object({
  id: z.number().int(),
  incident_id: z.number().int(),
  status: eventStatus,
  body: z.string(),
  state: z.enum(['draft', 'published']),
  published_at: z.string().nullable(),
  created_at: z.string(),
});

export const managedIncidentSchema = z.object({
  id: z.number().int(),
  kind: z.enum(['incident', 'maintenance']),
  name: z.string(),
  status: eventStatus,
  impact,
  component_ids: z.array(z.number().int()),
  internal_notes: z.string(),
  scheduled_for: z.string().nullable(),
  scheduled_until: z.string().nullable(),
  resolved_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

export const auditSchema = z.object({
  id: z.number().int(),
  actor: z.string(),
  action: z.string(),
  target: z.string().nullable(),
  detail: z.record(z.string(), z.unknown()),
  at: z.string(),
});

export const managedPageDetailSchema = z.object({
  ok: z.literal(true),
  page: managedPageSchema,
  components: z.array(managedComponentSchema),
  incidents: z.array(managedIncidentSchema.extend({ updates: z.array(managedUpdateSchema) })),
  audit: z.array(auditSchema),
});

// ---- the public summary (Statuspage summary.json shape) --------------------------------------------------

const publicUpdate = z.object({
  id: z.string(),
  incident_id: z.string(),
  status: eventStatus,
  body: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  display_at: z.string(),
});

const publicIncident = z.object({
  id: z.string(),
  name: z.string(),
  status: eventStatus,
  impact,
  shortlink: z.string(),
  page_id: z.string(),
  created_at: z.string(),
  started_at: z.string(),
  updated_at: z.string(),
  monitoring_at: z.string().nullable(),
  resolved_at: z.string().nullable(),
  scheduled_for: z.string().nullable().optional(),
  scheduled_until: z.string().nullable().optional(),
  incident_updates: z.array(publicUpdate).describe('Published updates, newest first'),
  components: z.array(z.object({ id: z.string(), name: z.string(), status: componentStatus })),
});

export const summarySchema = z.object({
  page: z.object({ id: z.string(), name: z.string(), url: z.string(), time_zone: z.string(), updated_at: z.string() }),
  status: z.object({
    indicator: z.enum(['none', 'minor', 'major', 'critical', 'maintenance']),
    description: z.string(),
  }),
  components: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      status: componentStatus,
      description: z.string().nullable(),
      position: z.number().int(),
      group_id: z.string().nullable(),
      group: z.boolean(),
      components: z.array(z.string()).optional().describe('Groups: the ids of their components'),
      page_id: z.string(),
      showcase: z.boolean(),
      only_show_if_degraded: z.boolean(),
      created_at: z.string(),
      updated_at: z.string(),
    }),
  ),
  incidents: z.array(publicIncident).describe('Unresolved incidents with at least one published update'),
  scheduled_maintenances: z.array(publicIncident).describe('Upcoming and in-progress maintenances with at least one published update'),
});
