import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processesWithArg } from '../../worker/test/helpers/procs.js';
import { MediaToolAborted, MediaToolError, ffprobe, mediaMimeType, runFfmpeg, stderrLines } from '../src/media.js';

/**
 * The ffprobe/ffmpeg helper against the real tools. Test media is made here with sox and the
 * ffmpeg CLI directly (not through the code under test).
 */

const run = promisify(execFile);
const make = (args: string[]) => run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...args]);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sonar-media-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Settles `p` and returns what it rejected with (null when it resolved). */
const rejection = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (err: unknown) => err,
  );

describe('ffprobe', () => {
  it('reads container, duration, streams and MIME type of generated media', async () => {
    const wav = path.join(dir, 'tone.wav');
    await run('sox', ['-n', '-r', '22050', '-c', '2', '-b', '16', wav, 'synth', '1.5', 'sine', '440']);
    const probe = await ffprobe(wav);
    expect(probe).toMatchObject({ formatName: 'wav', mime: 'audio/wav', audioStreams: 1, videoStreams: 0, sizeBytes: (await stat(wav)).size });
    expect(probe.durationSeconds).toBeCloseTo(1.5, 2);
    expect(probe.streams).toEqual([
      expect.objectContaining({ index: 0, codecType: 'audio', codecName: 'pcm_s16le', sampleRate: 22050, channels: 2, attachedPicture: false }),
    ]);

    // Video and audio in MP4.
    const mp4 = path.join(dir, 'clip.mp4');
    await make(['-f', 'lavfi', '-i', 'color=c=black:s=64x64:r=5', '-i', wav, '-map', '0:v', '-map', '1:a', '-t', '1', '-c:v', 'mpeg4', '-c:a', 'aac', mp4]);
    const mp4Probe = await ffprobe(mp4);
    expect(mp4Probe).toMatchObject({ mime: 'video/mp4', audioStreams: 1, videoStreams: 1 });
    expect(mp4Probe.formatName).toContain('mp4');
    expect(mp4Probe.streams.map((s) => s.codecType).sort()).toEqual(['audio', 'video']);

    // Matroska: the file name decides between WebM and Matroska, unless left out.
    const mka = path.join(dir, 'tone.mka');
    await make(['-i', wav, '-c:a', 'flac', mka]);
    expect(await ffprobe(mka)).toMatchObject({ formatName: 'matroska,webm', mime: 'audio/x-matroska', audioStreams: 1 });
    expect((await ffprobe(mka, { fileName: '' })).mime).toBe('audio/webm');

    // MP3 with cover art: the picture is a "video" stream that is not video.
    const cover = path.join(dir, 'cover.png');
    await make(['-f', 'lavfi', '-i', 'color=c=red:s=32x32', '-frames:v', '1', cover]);
    const mp3 = path.join(dir, 'song.mp3');
    await make(['-i', wav, '-i', cover, '-map', '0:a', '-map', '1:v', '-c:a', 'libmp3lame', '-c:v', 'png', '-disposition:v', 'attached_pic', mp3]);
    const mp3Probe = await ffprobe(mp3);
    expect(mp3Probe).toMatchObject({ formatName: 'mp3', mime: 'audio/mpeg', audioStreams: 1, videoStreams: 0 });
    expect(mp3Probe.streams.find((s) => s.codecType === 'video')?.attachedPicture).toBe(true);
  });

  it('rejects a file that is not media with ffprobe’s reason on stderr', async () => {
    const junk = path.join(dir, 'junk.bin');
    await writeFile(junk, Buffer.from(Array.from({ length: 8192 }, (_, i) => (i * 7919 + (i >> 3) * 104729) & 0xff)));
    const err = await rejection(ffprobe(junk));
    expect(err).toBeInstanceOf(MediaToolError);
    const e = err as MediaToolError;
    expect(e).toMatchObject({ tool: 'ffprobe', exitCode: 1, timedOut: false });
    expect(e.message).toMatch(/^ffprobe exited with code 1: .*junk\.bin: Invalid data found when processing input$/);
    expect(stderrLines(e.stderr).at(-1)).toMatch(/junk\.bin: Invalid data found/);

    const missing = await rejection(ffprobe(path.join(dir, 'missing.mp3')));
    expect((missing as MediaToolError).stderr).toMatch(/missing\.mp3: No such file or directory/);
  });

  it('says so when the tool is not installed', async () => {
    const saved = process.env.PATH;
    process.env.PATH = dir;
    try {
      const err = await rejection(ffprobe(path.join(dir, 'anything.wav')));
      expect(err).toBeInstanceOf(MediaToolError);
      expect((err as Error).message).toBe('ffprobe is not installed (not found on PATH)');
    } finally {
      process.env.PATH = saved;
    }
  });
});

describe('runFfmpeg', () => {
  /** ffmpeg arguments that write `out` at real-time speed for a minute (-re), unless stopped. */
  const slow = (out: string) => ['-v', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=8000', '-t', '60', '-y', out];

  it('runs ffmpeg to completion', async () => {
    const out = path.join(dir, 'made.wav');
    const { stderr } = await runFfmpeg(['-v', 'error', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=8000', '-t', '0.5', '-y', out]);
    expect(stderr).toBe('');
    expect((await ffprobe(out)).durationSeconds).toBeCloseTo(0.5, 2);
  });

  it('keeps the end of stderr for the error when ffmpeg fails', async () => {
    const err = await rejection(runFfmpeg(['-v', 'error', '-i', path.join(dir, 'nothing-here.wav'), path.join(dir, 'x.wav')]));
    expect(err).toBeInstanceOf(MediaToolError);
    expect(err).toMatchObject({ tool: 'ffmpeg', exitCode: 1 });
    expect((err as MediaToolError).message).toMatch(/^ffmpeg exited with code 1: .*nothing-here\.wav: No such file or directory$/);
  });

  it('starts nothing when the signal has already fired', async () => {
    const out = path.join(dir, 'never.wav');
    const reason = new Error('job cancelled');
    const err = await rejection(runFfmpeg(slow(out), { signal: AbortSignal.abort(reason) }));
    expect(err).toBeInstanceOf(MediaToolAborted);
    expect((err as MediaToolAborted).cause).toBe(reason);
    expect(processesWithArg(out)).toEqual([]);
    expect(existsSync(out)).toBe(false);
  });

  it('kills ffmpeg aborted while it starts, and rejects only once it has exited', async () => {
    const out = path.join(dir, 'starting.wav');
    const abort = new AbortController();
    const running = runFfmpeg(slow(out), { signal: abort.signal });
    abort.abort(); // spawn() has returned; ffmpeg has not had time to start up yet
    expect(await rejection(running)).toBeInstanceOf(MediaToolAborted);
    expect(processesWithArg(out)).toEqual([]);
  });

  it('kills ffmpeg aborted mid-run', async () => {
    const out = path.join(dir, 'mid-run.wav');
    const abort = new AbortController();
    const running = rejection(runFfmpeg(slow(out), { signal: abort.signal }));
    // Running: the process is there and has written its output file.
    await expect.poll(() => processesWithArg(out).length === 1 && existsSync(out), { timeout: 10_000, interval: 20 }).toBe(true);
    const [pid] = processesWithArg(out);
    abort.abort();
    expect(await running).toBeInstanceOf(MediaToolAborted);
    expect(processesWithArg(out)).toEqual([]);
    expect(() => process.kill(pid!, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
  });

  it('kills ffmpeg that runs past its timeout', async () => {
    const out = path.join(dir, 'too-long.wav');
    const started = Date.now();
    const err = await rejection(runFfmpeg(slow(out), { timeoutMs: 300 }));
    expect(err).toBeInstanceOf(MediaToolError);
    expect(err).toMatchObject({ tool: 'ffmpeg', timedOut: true, message: 'ffmpeg took longer than 300 ms and was stopped' });
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(processesWithArg(out)).toEqual([]);
  });
});

describe('mediaMimeType', () => {
  it('maps ffprobe format names, video or not, and the extension where a container has several', () => {
    expect(mediaMimeType('ogg', false)).toBe('audio/ogg');
    expect(mediaMimeType('ogg', true)).toBe('video/ogg');
    expect(mediaMimeType('ogg', false, 'talk.opus')).toBe('audio/opus');
    expect(mediaMimeType('mov,mp4,m4a,3gp,3g2,mj2', false, 'a.m4a')).toBe('audio/mp4');
    expect(mediaMimeType('mov,mp4,m4a,3gp,3g2,mj2', true, 'a.mov')).toBe('video/quicktime');
    expect(mediaMimeType('matroska,webm', true)).toBe('video/webm');
    expect(mediaMimeType('matroska,webm', true, 'film.mkv')).toBe('video/x-matroska');
    expect(mediaMimeType('mpegts', true)).toBe('video/mp2t');
    expect(mediaMimeType('tty', false)).toBeNull();
  });
});
