import type { Knex } from '@mikro-orm/postgresql';
import type { Orm } from '../../db/orm.js';
import type { StatedSpeakers } from './entities.js';
import type { DiarizationRecord, SpeakerLabels, TranscriptSegment } from './speakers.js';

/** One archived pass as stored in speech_revisions (read-only history of a re-transcribed job). */
export interface RevisionRow {
  pass: number;
  model: string;
  language: string | null;
  engine: string | null;
  engineModel: string | null;
  transcriptText: string | null;
  durationSeconds: number | null;
  diarization: DiarizationRecord;
  speakerLabels: SpeakerLabels;
  analysis: Record<string, unknown> | null;
  translations: unknown[];
  completedAt: Date | null;
  archivedAt: Date;
}

export interface RevisionSegment extends TranscriptSegment {
  seq: number;
}

interface RawRevision {
  pass: number;
  model: string;
  language: string | null;
  engine: string | null;
  engine_model: string | null;
  transcript_text: string | null;
  duration_seconds: number | null;
  diarization: unknown;
  speaker_labels: unknown;
  analysis: unknown;
  translations: unknown;
  completed_at: Date | string | null;
  archived_at: Date | string;
}

const json = (v: unknown): unknown => (typeof v === 'string' ? (JSON.parse(v) as unknown) : v);
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** A revision's `diarization` JSON as a DiarizationRecord; fields that are missing or mistyped read as absent. */
function diarizationOf(raw: unknown): DiarizationRecord {
  const d = json(raw);
  const o = isObject(d) ? d : {};
  const turns = Array.isArray(o.turns)
    ? o.turns.filter((t): t is [number, number, number] => Array.isArray(t) && t.length === 3 && t.every((n) => typeof n === 'number' && Number.isFinite(n)))
    : null;
  return {
    requested: o.requested === true,
    requested_speakers: statedSpeakersOf(o.requested_speakers),
    state: (str(o.state) ?? 'skipped') as DiarizationRecord['state'],
    engine: str(o.engine),
    speaker_count: typeof o.speaker_count === 'number' ? o.speaker_count : null,
    error: str(o.error),
    updated_at: str(o.updated_at),
    rerun_requested_at: str(o.rerun_requested_at),
    turns,
  };
}

/** A revision's stated speaker count (absent in revisions archived before it existed). */
function statedSpeakersOf(raw: unknown): StatedSpeakers | null {
  if (!isObject(raw)) return null;
  const out: StatedSpeakers = {};
  for (const key of ['num_speakers', 'min_speakers', 'max_speakers'] as const) {
    const v = raw[key];
    if (typeof v === 'number' && Number.isInteger(v)) out[key] = v;
  }
  return Object.keys(out).length ? out : null;
}

function labelsOf(raw: unknown): SpeakerLabels {
  const o = json(raw);
  if (!isObject(o)) return {};
  return Object.fromEntries(Object.entries(o).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

/** Reads of re-transcription history (speech_revisions). Revisions are written only by JobRepository.retranscribe. */
export class RevisionRepository {
  constructor(private readonly orm: Orm) {}

  private get knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  /** Earlier completed passes of a job, newest first. */
  async list(jobId: number): Promise<RevisionRow[]> {
    const { rows } = await this.knex.raw<{ rows: RawRevision[] }>(
      `select pass, model, language, engine, engine_model, transcript_text, duration_seconds, diarization, speaker_labels,
              analysis, translations, completed_at, archived_at
         from speech_revisions where job_id = ? order by pass desc`,
      [jobId],
    );
    return rows.map((r) => {
      const analysis = json(r.analysis);
      const translations = json(r.translations);
      return {
        pass: Number(r.pass),
        model: r.model,
        language: r.language,
        engine: r.engine,
        engineModel: r.engine_model,
        transcriptText: r.transcript_text,
        durationSeconds: r.duration_seconds === null ? null : Number(r.duration_seconds),
        diarization: diarizationOf(r.diarization),
        speakerLabels: labelsOf(r.speaker_labels),
        analysis: isObject(analysis) ? analysis : null,
        translations: Array.isArray(translations) ? (translations as unknown[]) : [],
        completedAt: r.completed_at === null ? null : new Date(r.completed_at),
        archivedAt: new Date(r.archived_at),
      };
    });
  }

  /** The stored segments of the given passes of a job, by pass, in order. */
  async segments(jobId: number, passes: number[]): Promise<Map<number, RevisionSegment[]>> {
    const byPass = new Map<number, RevisionSegment[]>(passes.map((p) => [p, []]));
    if (!passes.length) return byPass;
    const { rows } = await this.knex.raw<{
      rows: Array<{ pass: number; seq: number; start_seconds: number; end_seconds: number; text: string; speaker: string | null }>;
    }>(
      `select pass, seq, start_seconds, end_seconds, text, speaker from speech_segments
        where job_id = ? and pass = any(?::int[]) order by pass, seq`,
      [jobId, passes],
    );
    for (const r of rows) {
      byPass.get(Number(r.pass))?.push({ seq: Number(r.seq), start: Number(r.start_seconds), end: Number(r.end_seconds), text: r.text, speaker: r.speaker });
    }
    return byPass;
  }

  /** When the job's retained media was released by retention (its latest `media_released` log entry), or null. */
  async mediaReleasedAt(jobId: number): Promise<Date | null> {
    const { rows } = await this.knex.raw<{ rows: Array<{ at: Date | string }> }>(
      `select at from speech_job_events where job_id = ? and event = 'media_released' order by id desc limit 1`,
      [jobId],
    );
    return rows[0] ? new Date(rows[0].at) : null;
  }
}
