import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { deliveryJobId } from '../../coordinator/src/speech/notifications/callback-service.js';
import { SimWorker, waitFor } from '../support/sim-worker.js';

/**
 * Completion report e-mails through a real SMTP server (smtp-server) in the test process: one
 * report per terminal job (web or API) whose owner has an e-mail address, with the job link,
 * the status and the diarization summary.
 */

interface Mail {
  from: string;
  to: string[];
  raw: string;
  subject: string;
  text: string;
  html: string;
}

function decodePart(headers: string, body: string): string {
  const cte = /content-transfer-encoding:\s*([\w-]+)/i.exec(headers)?.[1]?.toLowerCase();
  if (cte === 'base64') return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  if (cte === 'quoted-printable') {
    const bytes = body.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
    return Buffer.from(bytes, 'latin1').toString('utf8');
  }
  return body;
}

/** Enough MIME for nodemailer's output: one level of multipart/alternative with text and HTML. */
function parseMail(raw: string, from: string, to: string[]): Mail {
  const split = raw.indexOf('\r\n\r\n');
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ');
  const body = raw.slice(split + 4);
  const subject = /^subject:\s*(.*)$/im.exec(head)?.[1] ?? '';
  const boundary = /boundary="?([^";\r\n]+)"?/i.exec(head)?.[1];
  let text = '';
  let html = '';
  const parts = boundary ? body.split(`--${boundary}`).slice(1, -1) : [`${head}\r\n\r\n${body}`];
  for (const part of parts) {
    const p = part.replace(/^\r\n/, '');
    const at = p.indexOf('\r\n\r\n');
    const h = p.slice(0, at);
    const decoded = decodePart(h, p.slice(at + 4).replace(/\r\n$/, ''));
    if (/content-type:\s*text\/plain/i.test(h)) text = decoded;
    if (/content-type:\s*text\/html/i.test(h)) html = decoded;
  }
  return { from, to, raw, subject, text: text.replace(/\r\n/g, '\n'), html };
}

const mails: Mail[] = [];
let smtp: SMTPServer;
let smtpPort = 0;
let db: TestDatabase;
let svc: RunningCoordinator;
let worker: SimWorker;
let alice: AuthUser;
let bob: AuthUser;
const aliceEmail = `${randomName('alice')}@example.org`;

const sql = <T>(q: string, params: unknown[] = []) => svc.orm.em.getConnection().execute<T[]>(q, params);
/** The outbox rows of these jobs' cycle were dispatched and their report deliveries finished: nothing more will be sent. */
async function reportsSettled(ids: number[], cycle = 1) {
  for (const id of ids) {
    // waitFor, not expect.poll: this also runs in beforeAll.
    // A job with nobody to notify (Bob has no address) has no row: it is written with the terminal state, or never.
    await waitFor(
      async () =>
        (await sql<{ d: boolean }>('select dispatched_at is not null as d from speech_notifications where job_id = ? and cycle = ?', [id, cycle]))[0]?.d ??
        'no row',
      20_000,
      `job ${id}'s notification dispatched`,
    );
    const job = await svc.notifications.reports!.queue.getJob(deliveryJobId(id, cycle));
    if (job) await waitFor(async () => ['completed', 'failed'].includes(await job.getState()), 20_000, `job ${id}'s report finished`);
  }
}
const mailsFor = (jobId: number) => mails.filter((m) => m.text.includes(`https://speech.example.org/speech/jobs/${jobId}\n`));
const lines = (m: Mail) => m.text.split('\n');

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
        mails.push(
          parseMail(
            Buffer.concat(chunks).toString('utf8'),
            from,
            session.envelope.rcptTo.map((r) => r.address),
          ),
        );
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  smtpPort = (smtp.server.address() as AddressInfo).port;

  db = await createTestDatabase();
  svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        PUBLIC_BASE_URL: 'https://speech.example.org',
        SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
        MAIL_FROM: 'Sonar Reports <reports@speech.example.org>',
      }),
    ),
  );
  const accounts = new AccountService(svc.orm);
  alice = (await accounts.createUser({ username: randomName('alice'), email: aliceEmail, permissions: ['speech.use'] })).user;
  bob = (await accounts.createUser({ username: randomName('bob'), permissions: ['speech.use'] })).user;
  worker = await SimWorker.start(svc, randomName('w'), ['small', 'turbo']);
});

afterAll(async () => {
  worker?.close();
  await svc?.close();
  await db?.drop();
  await new Promise<void>((resolve) => (smtp ? smtp.close(() => resolve()) : resolve()));
});

describe('completion reports', () => {
  let completedId = 0;
  let failedId = 0;
  let silentId = 0;

  beforeAll(async () => {
    // A completed API-queue job (gets a share) whose segments carry speaker labels for 2 speakers.
    const completed = await svc.speech.jobs.create(alice, {
      channel: 'api',
      source: { type: 'url', url: 'https://media.example.org/interview.mp3' },
      label: 'Interview with the mayor',
      model: 'turbo',
    });
    completedId = completed.id;
    await worker.run(completedId, {
      segments: ['Hello.', 'Hi there.', 'How are you?', 'Fine.'],
      speakers: [0, 1, 0, 1],
    });

    // A failed web job with diarization turned off.
    const failed = await svc.speech.jobs.create(alice, {
      channel: 'web',
      source: { type: 'url', url: 'https://media.example.org/broken.mp3' },
      label: 'Broken upload',
      diarization: false,
    });
    failedId = failed.id;
    await worker.run(failedId, { success: false, error: 'ffmpeg: invalid data found\n  at /srv/worker/decode.js:12' });

    // Bob has no e-mail address.
    const silent = await svc.speech.jobs.create(bob, { channel: 'web', source: { type: 'url', url: 'https://media.example.org/quiet.mp3' } });
    silentId = silent.id;
    await worker.run(silentId, { segments: ['nobody hears this'] });

    await waitFor(async () => mailsFor(completedId).length >= 1 && mailsFor(failedId).length >= 1, 20_000, 'two reports');
    await reportsSettled([completedId, failedId, silentId]); // anything extra (a duplicate, Bob's) would have been sent by now
  });

  it('sends exactly one report per terminal job to owners with an address, none otherwise', async () => {
    expect(mails).toHaveLength(2);
    for (const m of mails) {
      expect(m.to).toEqual([aliceEmail]);
      expect(m.from).toBe('reports@speech.example.org');
      expect(m.raw).toMatch(/^From: Sonar Reports <reports@speech\.example\.org>/m);
    }
    expect(mailsFor(completedId)).toHaveLength(1);
    expect(mailsFor(failedId)).toHaveLength(1);
    expect(mailsFor(silentId)).toHaveLength(0);
    const sent = await sql<{ id: number; report_sent_at: Date | null }>('select id, report_sent_at from speech_jobs where id in (?, ?, ?) order by id', [
      completedId,
      failedId,
      silentId,
    ]);
    expect(sent.map((r) => r.report_sent_at !== null)).toEqual([true, true, false]);
  });

  it('a completed report has the job link, share link, status, model and the diarization summary', async () => {
    const [m] = mailsFor(completedId);
    const [{ share_token }] = (await sql<{ share_token: string }>('select share_token from speech_jobs where id = ?', [completedId])) as [
      { share_token: string },
    ];
    expect(m!.subject).toBe('Transcription completed: Interview with the mayor');
    expect(lines(m!)).toEqual(
      expect.arrayContaining([
        'Transcription completed: Interview with the mayor',
        'Status: Completed',
        `Job page: https://speech.example.org/speech/jobs/${completedId}`,
        `Shared transcript: https://speech.example.org/shared/speech/transcript/${share_token}`,
        'Duration: 8 s',
        'Model: turbo',
        'Segments: 4',
        'Diarization: requested',
        'Diarization status: completed',
        'Diarization provider: test-diarizer',
        'Detected speakers: 2',
        'Labelled segments: 4',
      ]),
    );
    expect(m!.text).not.toMatch(/^Diarization note:/m);
    expect(m!.text).not.toMatch(/Failure reason/);
    expect(m!.html).toContain(`<a href="https://speech.example.org/speech/jobs/${completedId}">`);
    expect(m!.html).toContain('Detected speakers</th><td>2</td>');
  });

  it('a failed report has the status, a one-line failure reason and says diarization was disabled', () => {
    const [m] = mailsFor(failedId);
    expect(m!.subject).toBe('Transcription failed: Broken upload');
    expect(lines(m!)).toEqual(
      expect.arrayContaining([
        'Status: Failed',
        `Job page: https://speech.example.org/speech/jobs/${failedId}`,
        'Failure reason: ffmpeg: invalid data found at /srv/worker/decode.js:12',
        'Diarization: disabled',
        'Diarization status: skipped',
        'Diarization provider: none',
        'Detected speakers: 0',
        'Labelled segments: 0',
        'Diarization note: Speaker labels were turned off for this job.',
      ]),
    );
    expect(m!.text).not.toMatch(/Shared transcript/);
  });

  it('a repeated terminal event in the same cycle sends nothing; a new cycle sends a new report', async () => {
    expect(await svc.notifications.reports!.enqueue(completedId, 1, 'completed')).toBeNull();
    expect(await svc.notifications.outbox.drain()).toBe(0);
    expect(mailsFor(completedId)).toHaveLength(1);

    // Restarting the failed job starts cycle 2: its completion is reported again.
    await svc.speech.jobs.restart(alice, failedId);
    await worker.run(failedId, { segments: ['second try'] });
    await waitFor(async () => mailsFor(failedId).length === 2, 15_000, 'the second cycle report');
    await reportsSettled([failedId], 2);
    expect(mailsFor(failedId)).toHaveLength(2);
  });
});
