import { POCKETSPHINX_MODEL, SPEAKER_COUNT_CONTRACT_VERSION } from '@sonar/shared';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import { sql } from '../../db/sql.js';
import type { ExecutionTarget, StatedSpeakers } from './entities.js';
import { LOCAL_MODELS_KEY } from '../local-models.js';

/**
 * Languages of models whose workers do not say (agents from before `Capabilities.model_languages`).
 * Keyed by model name; an empty list means any language. Only engines whose limits are certain are
 * listed: Debian's pocketsphinx-en-us model hears US English only.
 */
export const KNOWN_MODEL_LANGUAGES: Readonly<Record<string, readonly string[]>> = {
  [POCKETSPHINX_MODEL]: ['en'],
};

/**
 * Registered, non-revoked workers that advertise the same capabilities, as the catalog sees them: a
 * fleet is mostly alike, so a snapshot holds a few groups however many workers there are.
 */
export interface CatalogGroup {
  /** The coordinator's own local runner (quick start). */
  local: boolean;
  /** Models it takes on `auto` jobs: what it advertises; for a local runner only those on the local allowlist (admin setting, seeded by SPEECH_LOCAL_MODELS). */
  models: string[];
  /** Model → languages it transcribes; [] any language; a model missing here: not known. */
  languages: Record<string, readonly string[]>;
  /** It has a working diarizer (takes `auto` jobs that ask for speaker labels). */
  diarization: boolean;
  /** Its workers speak contract 5 or later: they may take jobs with a stated speaker count. */
  speakerCounts: boolean;
  /** Ids of the group's workers seen within WORKER_PRESENCE_TTL_MS (by the database clock). */
  presentIds: number[];
}

/** A submission the catalog refuses: the field and the message of the 422. */
export interface CatalogRefusal {
  field: 'model' | 'language';
  message: string;
}

/** What a job needs to know to say whether someone can take it now. */
export interface WaitingJob {
  status: string;
  model: string;
  executionTarget: ExecutionTarget;
  targetWorker?: { id: number; name: string } | null;
  /** The job asks for speaker labels: an `auto` job waits for a worker with a diarizer. */
  diarizationRequested?: boolean;
  /** A stated speaker count: only workers of contract 5 or later may take the job. */
  diarizationSpeakers?: StatedSpeakers | null;
}

/** Whether a queued job can be taken by a connected worker; `explain` says why not (null: it can). */
export interface JobAvailability {
  explain(job: WaitingJob): string | null;
}

const list = (items: readonly string[]) => (items.length ? items.join(', ') : 'none');

/** `de-DE`, `DE`, `de_DE` → `de`; empty and `auto` → null (the engine detects). */
export function primaryLanguage(language: string | null | undefined): string | null {
  const primary = (language ?? '').trim().toLowerCase().split(/[-_]/)[0] ?? '';
  return primary && primary !== 'auto' ? primary : null;
}

/**
 * The models registered workers really serve, read in one query. Refusals and waiting reasons are
 * computed from the same snapshot, so a list of jobs costs one query, not one per job.
 */
export class ModelCatalogSnapshot implements JobAvailability {
  constructor(readonly groups: readonly CatalogGroup[]) {}

  private static modelsOf(groups: readonly CatalogGroup[]): string[] {
    return [...new Set(groups.flatMap((g) => g.models))].sort();
  }

  // Computed once per snapshot: a job list asks for each job.
  private servedModels?: string[];
  private connectedModels?: string[];
  private takerGroups?: CatalogGroup[];
  private presentIds?: Set<number>;

  /** Models a job may ask for: served by at least one registered worker, connected or not. */
  served(): string[] {
    return (this.servedModels ??= ModelCatalogSnapshot.modelsOf(this.groups));
  }

  /** Models a connected worker takes now (a local runner stands by while a remote worker is connected). */
  connected(): string[] {
    return (this.connectedModels ??= ModelCatalogSnapshot.modelsOf(this.takers()));
  }

  /** Models the local runner serves (its allowlist applied), connected or not. */
  localModels(): string[] {
    return ModelCatalogSnapshot.modelsOf(this.groups.filter((g) => g.local));
  }

  private present(): CatalogGroup[] {
    return this.groups.filter((g) => g.presentIds.length > 0);
  }

  /** Connected workers that take `auto` jobs now, with the claim's rule for the local runner. */
  private takers(): CatalogGroup[] {
    if (!this.takerGroups) {
      const present = this.present();
      const remote = present.filter((g) => !g.local);
      this.takerGroups = remote.length ? remote : present;
    }
    return this.takerGroups;
  }

  private isPresent(workerId: number): boolean {
    this.presentIds ??= new Set(this.groups.flatMap((g) => g.presentIds));
    return this.presentIds.has(workerId);
  }

  /** Languages `model` is known to take: null when any language may work (or nobody says). */
  languagesOf(model: string): string[] | null {
    const serving = this.groups.filter((g) => g.models.includes(model));
    const known = new Set<string>();
    for (const g of serving) {
      const langs = g.languages[model] ?? KNOWN_MODEL_LANGUAGES[model];
      if (!langs || !langs.length) return null;
      for (const l of langs) known.add(l);
    }
    return serving.length ? [...known].sort() : null;
  }

  /** Why a submission for `model` (and `language`) cannot run anywhere; null when it can. */
  refusal(model: string, language?: string | null): CatalogRefusal | null {
    const served = this.served();
    if (!served.includes(model)) {
      return {
        field: 'model',
        message: served.length
          ? `no registered worker serves model "${model}"; served models: ${served.join(', ')}`
          : `no registered worker serves model "${model}"; no worker has registered any model yet`,
      };
    }
    const wanted = primaryLanguage(language);
    const languages = this.languagesOf(model);
    if (wanted && languages && !languages.includes(wanted)) {
      return {
        field: 'language',
        message: `model "${model}" transcribes only ${list(languages)}, not "${wanted}"; leave language empty or choose another model`,
      };
    }
    return null;
  }

  /** A note for a model that is served only by workers that are not connected now; null otherwise. */
  offlineNote(model: string): string | null {
    if (!this.served().includes(model) || this.connected().includes(model)) return null;
    return this.noTakerReason(model);
  }

  private noTakerReason(model: string): string {
    const present = this.present();
    const localOnly = present.filter((g) => g.local && g.models.includes(model));
    if (localOnly.length && present.some((g) => !g.local)) {
      return `No connected remote worker serves model "${model}"; the local runner that has it stands by while remote workers are connected (connected: ${list(this.connected())})`;
    }
    return `No connected worker serves model "${model}" (connected: ${list(this.connected())})`;
  }

  explain(job: WaitingJob): string | null {
    if (job.status !== 'queued') return null;
    if (job.executionTarget === 'worker') {
      const target = job.targetWorker ?? null;
      if (!target || !this.isPresent(target.id)) return `The pinned worker "${target?.name ?? '?'}" is not connected`;
      if (job.diarizationSpeakers && !this.groups.some((g) => g.speakerCounts && g.presentIds.includes(target.id))) {
        return `The pinned worker "${target.name}" speaks a worker contract older than ${SPEAKER_COUNT_CONTRACT_VERSION} and cannot honour the stated speaker count; upgrade it or choose another target`;
      }
      return null;
    }
    if (job.executionTarget === 'local') {
      return this.present().some((g) => g.local) ? null : 'No local runner is connected';
    }
    const serving = this.takers().filter((g) => g.models.includes(job.model));
    if (!serving.length) return this.noTakerReason(job.model);
    if (job.diarizationRequested && !serving.some((g) => g.diarization)) {
      return `No connected worker that serves model "${job.model}" can label speakers (diarization); turn speaker labels off or connect a worker with a diarizer`;
    }
    if (job.diarizationRequested && job.diarizationSpeakers && !serving.some((g) => g.diarization && g.speakerCounts)) {
      return `No connected worker that serves model "${job.model}" can honour a stated speaker count (it needs a worker agent of contract ${SPEAKER_COUNT_CONTRACT_VERSION} or later); upgrade the worker agents`;
    }
    return null;
  }
}

/** speech_workers.capabilities as advertised: every field is checked before use. */
interface WorkerCapabilities {
  models?: unknown;
  local?: unknown;
  modelLanguages?: unknown;
  diarization?: unknown;
}

/** Registered workers that advertise the same capabilities; the ids of those present, comma-separated. */
interface CapabilityGroupRow {
  capabilities: WorkerCapabilities | string | null;
  speaker_counts: boolean;
  present_ids: string | null;
}

/**
 * The catalog's one statement (every job list, status response and job created asks for a
 * snapshot): a named prepared statement, parsed and planned once per pooled connection; as a
 * MikroORM `execute` it was sent as text with the values inlined and planned on every request.
 */
const CATALOG_SNAPSHOT = sql<{ presence: number; key: string; counts: number }, { groups: CapabilityGroupRow[] | null; allow: unknown }>(
  `select (select json_agg(json_build_object('capabilities', capabilities, 'speaker_counts', speaker_counts, 'present_ids', present_ids))
             from (select capabilities, coalesce(contract_version, 0) >= :counts::int as speaker_counts,
                          string_agg(id::text, ',') filter (where last_seen_at > now() - make_interval(secs => :presence::float8)) as present_ids
                     from speech_workers where revoked_at is null and capabilities is not null
                    group by 1, 2) g) as groups,
          (select value from app_settings where key = :key) as allow`,
  'model_catalog_snapshot',
);

/** Reads registered workers' advertised models (speech_workers.capabilities) with the local allowlist applied. */
export class ModelCatalog {
  constructor(
    private readonly orm: Orm,
    private readonly config: Pick<Config, 'SPEECH_LOCAL_MODELS' | 'WORKER_PRESENCE_TTL_MS'>,
  ) {}

  /** The snapshot read now in flight for `concurrent()` callers (null when none is). */
  private inFlight: Promise<ModelCatalogSnapshot> | null = null;

  /**
   * A snapshot for a read that may share one with others asking at the same time: while a read is
   * in flight, callers get its answer (begun at most one statement's time before they asked)
   * instead of sending the statement again. Under many concurrent job lists this is one catalog
   * statement per round trip instead of one per list. Writes (a job created) use snapshot().
   */
  concurrent(): Promise<ModelCatalogSnapshot> {
    if (this.inFlight) return this.inFlight;
    const read = this.snapshot().finally(() => {
      if (this.inFlight === read) this.inFlight = null;
    });
    this.inFlight = read;
    return read;
  }

  /**
   * One query, grouped by the advertised capabilities: a fleet is mostly alike, so each distinct set
   * is read and checked once however many workers share it (1,000 workers: one group, not 1,000 JSON
   * documents on every job created).
   */
  async snapshot(): Promise<ModelCatalogSnapshot> {
    // One statement (every job list, status response and job created asks for a snapshot): the
    // workers grouped by their advertised capabilities (and whether they speak contract 5), with the ids of those present as one
    // comma-separated text per group (a fleet's thousand ids split at once, not a Postgres array
    // read character by character), and the administrator's allowlist (app_settings, else
    // SPEECH_LOCAL_MODELS).
    const snapshot = await CATALOG_SNAPSHOT.first(this.orm.em.getConnection().getKnex(), {
      presence: this.config.WORKER_PRESENCE_TTL_MS / 1000,
      key: LOCAL_MODELS_KEY,
      counts: SPEAKER_COUNT_CONTRACT_VERSION,
    });
    const groups = snapshot?.groups ?? [];
    const stored = snapshot?.allow;
    const allow = new Set(Array.isArray(stored) ? stored.filter((m): m is string => typeof m === 'string') : this.config.SPEECH_LOCAL_MODELS);
    return new ModelCatalogSnapshot(
      groups.map((group) => {
        const parsed: unknown = typeof group.capabilities === 'string' ? JSON.parse(group.capabilities) : group.capabilities;
        const caps: WorkerCapabilities = parsed !== null && typeof parsed === 'object' ? parsed : {};
        const local = caps.local === true;
        const advertised: string[] = Array.isArray(caps.models) ? caps.models.filter((m): m is string => typeof m === 'string') : [];
        const languages: Record<string, readonly string[]> = {};
        if (caps.modelLanguages && typeof caps.modelLanguages === 'object') {
          for (const [model, langs] of Object.entries(caps.modelLanguages as Record<string, unknown>)) {
            if (Array.isArray(langs)) languages[model] = langs.filter((l): l is string => typeof l === 'string').map((l) => l.toLowerCase());
          }
        }
        return {
          local,
          models: local ? advertised.filter((m) => allow.has(m)) : advertised,
          languages,
          diarization: caps.diarization === true,
          speakerCounts: group.speaker_counts,
          presentIds: group.present_ids ? group.present_ids.split(',').map(Number) : [],
        };
      }),
    );
  }
}
