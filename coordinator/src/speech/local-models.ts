import type { Orm } from '../db/orm.js';
import { validationFailed } from '../http/errors.js';

/** The app_settings key of the local runner's model allowlist (the local runner takes only these models automatically). */
export const LOCAL_MODELS_KEY = 'speech.local_models';

/**
 * The allowlist in SQL: the administrator's setting, else the seed bound as `:allow`
 * (SPEECH_LOCAL_MODELS). An uncorrelated subquery, so PostgreSQL reads it once per statement, and
 * every coordinator sees a change at once (no cache to invalidate).
 */
export const LOCAL_ALLOWLIST_SQL = `coalesce((select array(select jsonb_array_elements_text(st.value)) from app_settings st where st.key = '${LOCAL_MODELS_KEY}'), :allow::text[])`;

const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,59}$/;

export interface LocalModelSetting {
  models: string[];
  /** `database` once an administrator saved it; `environment` while SPEECH_LOCAL_MODELS seeds it. */
  source: 'database' | 'environment';
  updatedAt: Date | null;
  updatedBy: string | null;
}

/** The local model allowlist as an administrator setting stored in PostgreSQL (the environment only seeds it). */
export class LocalModelSettings {
  constructor(
    private readonly orm: Orm,
    private readonly seed: readonly string[],
  ) {}

  async get(): Promise<LocalModelSetting> {
    const rows = await this.orm.em
      .getConnection()
      .execute<Array<{ value: unknown; updated_at: Date; updated_by: string | null }>>('select value, updated_at, updated_by from app_settings where key = ?', [
        LOCAL_MODELS_KEY,
      ]);
    const row = rows[0];
    if (!row || !Array.isArray(row.value)) return { models: [...this.seed], source: 'environment', updatedAt: null, updatedBy: null };
    return {
      models: row.value.filter((m): m is string => typeof m === 'string'),
      source: 'database',
      updatedAt: new Date(row.updated_at),
      updatedBy: row.updated_by,
    };
  }

  /** Saves the allowlist (names as in "small, large"); an empty list means the local runner runs nothing automatically. */
  async set(models: readonly string[], by: string): Promise<LocalModelSetting> {
    const clean = [...new Set(models.map((m) => m.trim()).filter(Boolean))];
    const bad = clean.filter((m) => !MODEL_NAME.test(m));
    if (bad.length) throw validationFailed({ local_models: [`not a model name: ${bad.join(', ')}`] });
    if (clean.length > 50) throw validationFailed({ local_models: ['at most 50 models'] });
    await this.orm.em.getConnection().execute(
      `insert into app_settings (key, value, updated_at, updated_by) values (?, ?::jsonb, now(), ?)
       on conflict (key) do update set value = excluded.value, updated_at = now(), updated_by = excluded.updated_by`,
      [LOCAL_MODELS_KEY, JSON.stringify(clean), by.slice(0, 200)],
    );
    return this.get();
  }
}
