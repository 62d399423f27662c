import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { openOrm, type Orm } from '../../coordinator/src/db/orm.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import type { JobEventSink } from '../../coordinator/src/speech/jobs/job-events.js';
import { JobRepository, hashLeaseToken, type ProgressBatch } from '../../coordinator/src/speech/jobs/job-repository.js';
import type { StoredTurn } from '../../coordinator/src/speech/jobs/speakers.js';
import { timelineFaults } from '../../coordinator/src/speech/jobs/timeline.js';
import type { Word } from '../../coordinator/src/speech/jobs/word-speakers.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { startNode, type Proc } from '../support/processes.js';
import { makeTwoVoiceRecording } from '../support/two-voice.js';

/**
 * One timeline where segments are stored (docs/speech.md, "One timeline"): batches that arrive
 * crossed (a segment starting before the one stored before it, words going backwards or outside
 * their segment, resends, a segment arriving before the one it precedes) go through the real write
 * path (JobRepository.writeProgress, PROGRESS, under a live lease) and labelSegments, and what
 * PostgreSQL holds is one timeline. Then a real worker agent (a child process over gRPC) transcribes
 * and diarizes a two-voice espeak-ng recording with pocketsphinx, a rerun re-labels it (after its
 * stored pass was made crossed, as before this check), and every stored pass is checked after each.
 */

type Row = { pass: number; seq: number; start: number; end: number; text: string; speaker: string | null; words: Word[] | null };

const sink: JobEventSink = { segment() {}, status() {}, diarization() {}, ai() {}, changed() {} };
const TOKEN = 'timeline-lease';
const ref = (job: number) => ({ job_id: job, attempt: 1, lease_token: TOKEN });
const w = (text: string, start: number, end: number): Word => ({ text, start, end });

let db: TestDatabase;
let orm: Orm;
let repo: JobRepository;
let owner: number;
let worker: number;

/** Every stored segment of a job, all passes, in order. */
async function storedRows(job: number): Promise<Row[]> {
  const { rows } = await repo.knex.raw<{ rows: Row[] }>(
    `select pass, seq, start_seconds as start, end_seconds as end, text, speaker, words from speech_segments where job_id = ? order by pass, seq`,
    [job],
  );
  return rows;
}

/** The timeline faults of each stored pass of a job (none when every pass is one timeline), and how many passes there are. */
async function passFaults(job: number): Promise<{ passes: number; faults: string[] }> {
  const rows = await storedRows(job);
  const passes = [...new Set(rows.map((r) => r.pass))];
  return { passes: passes.length, faults: passes.flatMap((p) => timelineFaults(rows.filter((r) => r.pass === p)).map((f) => `pass ${p}: ${f}`)) };
}

/** A job in `transcribing` with a live lease of attempt 1 held by `worker`. */
async function seedJob(): Promise<number> {
  const { rows } = await repo.knex.raw<{ rows: Array<{ id: number }> }>(
    `insert into speech_jobs (owner_id, source_type, source_filename, media_path, model, status, attempt, execution_target, diarization_requested, diarization_state)
     values (?, 'upload', 'a.wav', '/media/a.wav', 'tiny', 'transcribing', 1, 'auto', true, 'running') returning id`,
    [owner],
  );
  const id = rows[0]!.id;
  await repo.knex.raw(`insert into speech_leases (job_id, attempt, worker_id, token_hash, expires_at) values (?, 1, ?, ?, now() + interval '1 hour')`, [
    id,
    worker,
    hashLeaseToken(TOKEN),
  ]);
  return id;
}

const progress = (job: number, segments: ProgressBatch['segments']) =>
  repo.writeProgress({
    ref: ref(job),
    workerId: worker,
    stage: 'transcribing',
    stageDetail: '',
    position: 0,
    durationSeconds: 600,
    engine: 'test',
    engineModel: 'test',
    segments,
    diarizing: false,
  });

beforeAll(async () => {
  db = await createTestDatabase();
  orm = await openOrm({ databaseUrl: db.url, poolMax: 2, migrator: false });
  repo = new JobRepository(orm, sink, false);
  owner = (await repo.knex.raw<{ rows: Array<{ id: number }> }>(`insert into users (username, password_hash) values ('timeline', 'x') returning id`)).rows[0]!
    .id;
  worker = (await repo.knex.raw<{ rows: Array<{ id: number }> }>(`insert into speech_workers (name, secret_hash) values ('timeline', 'x') returning id`))
    .rows[0]!.id;
});

afterAll(async () => {
  await orm?.close(true);
  await db?.drop();
});

describe('segments that arrive crossed are stored as one timeline', () => {
  it('PROGRESS trims a segment that starts before the stored one, fits words, and clamps a late arrival between its neighbours', async () => {
    const job = await seedJob();
    // the case: a segment ending at 390.91, the next starting before it at 386.23 ("tragic"), words going backwards
    expect(
      await progress(job, [
        { seq: 0, start: 387.33, end: 390.91, text: 'it was', words: [w('it', 387.33, 389), w('was', 388.1, 390.91)] },
        { seq: 1, start: 386.23, end: 392.0, text: 'tragic and', words: [w('tragic', 386.23, 391.5), w('and', 391.6, 393)] },
      ]),
    ).toEqual([0, 1]);
    // a resend of seq 1 with other times (ignored), one wholly before what is stored, one with a word outside it
    expect(
      await progress(job, [
        { seq: 1, start: 300, end: 301, text: 'tragic and', words: [] },
        { seq: 2, start: 387.42, end: 388.5, text: 'then', words: [w('then', 387.42, 388.5)] },
        { seq: 3, start: 392.5, end: 400.78, text: 'more of it', words: [w('more', 392.5, 393), w('of', 380, 381), w('it', 399, 402)] },
      ]),
    ).toEqual([2, 3]);
    // seq 5 arrives before seq 4 (a stream that broke and was resent), and seq 4 overlaps both neighbours
    expect(await progress(job, [{ seq: 5, start: 410, end: 415, text: 'later', words: [w('later', 410, 415)] }])).toEqual([5]);
    expect(await progress(job, [{ seq: 4, start: 399, end: 412, text: 'in between', words: [w('in', 399, 405), w('between', 406, 412)] }])).toEqual([4]);

    const rows = await storedRows(job);
    expect(timelineFaults(rows)).toEqual([]);
    const times = (r: Row) => [r.seq, r.start, r.end, r.text, r.words?.map((x) => [x.text, x.start, x.end]) ?? null];
    expect(rows.map(times)).toEqual([
      [
        0,
        387.33,
        390.91,
        'it was',
        [
          ['it', 387.33, 388.1],
          ['was', 388.1, 390.91],
        ],
      ],
      [
        1,
        390.91,
        392,
        'tragic and',
        [
          ['tragic', 390.91, 391.5],
          ['and', 391.6, 392],
        ],
      ],
      [2, 392, 392, 'then', [['then', 392, 392]]],
      [
        3,
        392.5,
        400.78,
        'more of it',
        [
          ['more', 392.5, 392.5],
          ['of', 392.5, 392.5],
          ['it', 399, 400.78],
        ],
      ],
      [
        4,
        400.78,
        410,
        'in between',
        [
          ['in', 400.78, 405],
          ['between', 406, 410],
        ],
      ],
      [5, 410, 415, 'later', [['later', 410, 415]]],
    ]);

    // labelling splits at speaker changes and stays one timeline
    const turns: StoredTurn[] = [
      [380, 391.55, 0],
      [391.55, 399.5, 1],
      [399.5, 420, 2],
    ];
    const labelled = await repo.labelSegments(worker, ref(job), turns);
    expect(labelled!.segments.length).toBeGreaterThan(rows.length);
    const after = await storedRows(job);
    expect(timelineFaults(after)).toEqual([]);
    expect(after.map((r) => r.text).join(' ')).toBe('it was tragic and then more of it in between later');
  });

  it('labelSegments makes a pass stored crossed (before this check existed) one timeline', async () => {
    const job = await seedJob();
    const crossed = [
      [0, 387.33, 390.91, 'it was', [w('it', 387.33, 389), w('was', 388.1, 390.91)]],
      [1, 386.23, 390.91, 'tragic', [w('tragic', 386.23, 390.91)]],
      [2, 387.42, 400.78, 'then more', [w('then', 387.42, 388), w('more', 392.5, 402)]],
    ] as const;
    for (const [seq, start, end, text, words] of crossed) {
      await repo.knex.raw(`insert into speech_segments (job_id, pass, seq, start_seconds, end_seconds, text, words) values (?, 1, ?, ?, ?, ?, ?::jsonb)`, [
        job,
        seq,
        start,
        end,
        text,
        JSON.stringify(words),
      ]);
    }
    expect(timelineFaults(await storedRows(job))).not.toEqual([]);
    await repo.labelSegments(worker, ref(job), [
      [380, 388, 0],
      [388, 401, 1],
    ]);
    const rows = await storedRows(job);
    expect(timelineFaults(rows)).toEqual([]);
    expect(rows.map((r) => r.text).join(' ')).toBe('it was tragic then more');
  });
});

describe('one timeline on real audio, through the real worker agent', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sonar-timeline-'));
  const procs: Proc[] = [];
  let svc: RunningCoordinator;
  let user: AuthUser;
  let jwt: string;

  const api = async (method: string, url: string) => {
    const res = await fetch(`${svc.url}${url}`, { method, headers: { authorization: `Bearer ${jwt}` } });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const detail = async (id: number) => (await api('GET', `/api/speech/jobs/${id}`)).body.job as Record<string, any>;

  beforeAll(async () => {
    svc = await startCoordinator(loadConfig(testEnv(db, { SPEECH_MEDIA_DIR: path.join(dir, 'media'), WORKER_HEARTBEAT_INTERVAL_MS: '1000' })));
    const created = await new AccountService(svc.orm).createUser({ username: randomName('timeline'), permissions: ['speech.use'] });
    user = created.user;
    const login = await fetch(`${svc.url}/api/account/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: user.username, password: created.password }),
    });
    jwt = ((await login.json()) as { token: string }).token;
    const { secret } = await svc.workers.createWorker(randomName('timeline'));
    const agent = startNode('worker/dist/bin.js', ['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--work-dir', dir], { WORKER_SECRET: secret });
    procs.push(agent);
    await agent.waitFor(/connected to coordinator/);
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    await svc?.close();
  });

  it('every stored pass is one timeline after transcription with diarization and after a rerun, even of a pass stored crossed', async () => {
    const { wavPath } = await makeTwoVoiceRecording(dir);
    const bytes = readFileSync(wavPath);
    const temp = path.join(dir, `${randomName('upload')}.part`);
    writeFileSync(temp, bytes);
    const job = await svc.speech.jobs.create(user, {
      channel: 'web',
      model: 'pocketsphinx-en-us',
      diarization: true,
      source: { type: 'upload', tempPath: temp, filename: 'two-voices.wav', sizeBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') },
    });
    await expect.poll(async () => (await detail(job.id)).status, { timeout: 120_000, interval: 250 }).toBe('completed');
    expect((await detail(job.id)).diarization.state).toBe('completed');
    const first = await passFaults(job.id);
    expect(first.passes).toBeGreaterThan(0);
    expect(first.faults).toEqual([]);
    const rows = await storedRows(job.id);
    expect(rows.length).toBeGreaterThanOrEqual(4);
    expect(rows.every((r) => r.words?.length && r.speaker)).toBe(true);

    // A pass stored crossed before this check existed: a segment moved to start with the one before
    // it and its first word to start there too. The rerun re-labels the stored words and fits them.
    const { rows: labelled } = await repo.knex.raw<{ rows: Array<Row & { source_seq: number }> }>(
      `select s.seq, s.start_seconds as start, s.words, s.source_seq from speech_segments s join speech_jobs j on j.id = s.job_id and j.current_pass = s.pass
        where j.id = ? order by s.seq`,
      [job.id],
    );
    const i = labelled.findIndex((r, k) => k > 0 && r.source_seq !== labelled[k - 1]!.source_seq);
    expect(i).toBeGreaterThan(0);
    const moved = labelled[i]!;
    const early = labelled[i - 1]!.start;
    await repo.knex.raw(
      `update speech_segments set start_seconds = ?, words = ?::jsonb where job_id = ? and seq = ? and pass = (select current_pass from speech_jobs where id = ?)`,
      [early, JSON.stringify(moved.words!.map((x, k) => (k === 0 ? { ...x, start: early } : x))), job.id, moved.seq, job.id],
    );
    expect((await passFaults(job.id)).faults).not.toEqual([]);

    const rerun = await api('POST', `/api/speech/jobs/${job.id}/diarization`);
    expect(rerun.status, JSON.stringify(rerun.body)).toBe(200);
    await expect
      .poll(async () => (await detail(job.id)).diarization, { timeout: 60_000, interval: 250 })
      .toMatchObject({ state: 'completed', rerun_pending: false });
    expect((await passFaults(job.id)).faults).toEqual([]);
  }, 240_000);
});
