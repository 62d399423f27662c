import { POCKETSPHINX_MODEL } from '@sonar/shared';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import type { ExecutionTarget } from './entities.js';
import { LOCAL_MODELS_KEY } from '../local-models.js';

/**
 * Languages of models whose workers do not say (agents from before `Capabilities.model_languages`).
 * Keyed by model name; an empty list means any language. Only engines whose limits are certain are
 * listed: Debian's pocketsphinx-en-us model hears US English only.
 */
export const KNOWN_MODEL_LANGUAGES: Readonly<Record<string, readonly string[]>> = {
  [POCKETSPHINX_MODEL]: ['en'],
};

/** One registered, non-revoked worker as the catalog sees it. */
export interface CatalogWorker {
  id: number;
  name: string;
  /** The coordinator's own local runner (quick start). */
  local: boolean;
  /** Seen within WORKER_PRESENCE_TTL_MS (by the database clock). */
  present: boolean;
  /** Models it takes on `auto` jobs: what it advertises; for a local runner only those on the local allowlist (admin setting, seeded by SPEECH_LOCAL_MODELS). */
  models: string[];
  /** Model → languages it transcribes; [] any language; a model missing here: not known. */
  languages: Record<string, readonly string[]>;
  /** It has a working diarizer (takes `auto` jobs that ask for speaker labels). */
  diarization: boolean;
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
  constructor(readonly workers: readonly CatalogWorker[]) {}

  private static modelsOf(workers: readonly CatalogWorker[]): string[] {
    return [...new Set(workers.flatMap((w) => w.models))].sort();
  }

  /** Models a job may ask for: served by at least one registered worker, connected or not. */
  served(): string[] {
    return ModelCatalogSnapshot.modelsOf(this.workers);
  }

  /** Models a connected worker takes now (a local runner stands by while a remote worker is connected). */
  connected(): string[] {
    return ModelCatalogSnapshot.modelsOf(this.takers());
  }

  /** Connected workers that take `auto` jobs now, with the claim's rule for the local runner. */
  private takers(): CatalogWorker[] {
    const present = this.workers.filter((w) => w.present);
    const remote = present.filter((w) => !w.local);
    return remote.length ? remote : present;
  }

  /** Languages `model` is known to take: null when any language may work (or nobody says). */
  languagesOf(model: string): string[] | null {
    const serving = this.workers.filter((w) => w.models.includes(model));
    const known = new Set<string>();
    for (const w of serving) {
      const langs = w.languages[model] ?? KNOWN_MODEL_LANGUAGES[model];
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
    const present = this.workers.filter((w) => w.present);
    const localOnly = present.filter((w) => w.local && w.models.includes(model));
    if (localOnly.length && present.some((w) => !w.local)) {
      return `No connected remote worker serves model "${model}"; the local runner that has it stands by while remote workers are connected (connected: ${list(this.connected())})`;
    }
    return `No connected worker serves model "${model}" (connected: ${list(this.connected())})`;
  }

  explain(job: WaitingJob): string | null {
    if (job.status !== 'queued') return null;
    if (job.executionTarget === 'worker') {
      const target = job.targetWorker ?? null;
      const w = target && this.workers.find((x) => x.id === target.id);
      return w?.present ? null : `The pinned worker "${target?.name ?? '?'}" is not connected`;
    }
    if (job.executionTarget === 'local') {
      return this.workers.some((w) => w.local && w.present) ? null : 'No local runner is connected';
    }
    const serving = this.takers().filter((w) => w.models.includes(job.model));
    if (!serving.length) return this.noTakerReason(job.model);
    if (job.diarizationRequested && !serving.some((w) => w.diarization)) {
      return `No connected worker that serves model "${job.model}" can label speakers (diarization); turn speaker labels off or connect a worker with a diarizer`;
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

interface WorkerRow {
  id: number;
  name: string;
  capabilities: WorkerCapabilities | string | null;
  present: boolean;
}

/** Reads registered workers' advertised models (speech_workers.capabilities) with the local allowlist applied. */
export class ModelCatalog {
  constructor(
    private readonly orm: Orm,
    private readonly config: Pick<Config, 'SPEECH_LOCAL_MODELS' | 'WORKER_PRESENCE_TTL_MS'>,
  ) {}

  async snapshot(): Promise<ModelCatalogSnapshot> {
    // The workers and the administrator's allowlist (app_settings, else SPEECH_LOCAL_MODELS) in one
    // statement: every job list and status response asks for a snapshot.
    const [snapshot] = await this.orm.em.getConnection().execute<Array<{ workers: WorkerRow[] | null; allow: unknown }>>(
      `select (select json_agg(json_build_object('id', id, 'name', name, 'capabilities', capabilities,
                                                 'present', coalesce(last_seen_at > now() - make_interval(secs => ?), false)) order by id)
                 from speech_workers where revoked_at is null and capabilities is not null) as workers,
              (select value from app_settings where key = ?) as allow`,
      [this.config.WORKER_PRESENCE_TTL_MS / 1000, LOCAL_MODELS_KEY],
    );
    const rows = snapshot?.workers ?? [];
    const stored = snapshot?.allow;
    const allow = new Set(Array.isArray(stored) ? stored.filter((m): m is string => typeof m === 'string') : this.config.SPEECH_LOCAL_MODELS);
    return new ModelCatalogSnapshot(
      rows.map((row) => {
        const parsed: unknown = typeof row.capabilities === 'string' ? JSON.parse(row.capabilities) : row.capabilities;
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
          id: Number(row.id),
          name: row.name,
          local,
          present: row.present,
          models: local ? advertised.filter((m) => allow.has(m)) : advertised,
          languages,
          diarization: caps.diarization === true,
        };
      }),
    );
  }
}
