import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import {
  createWorkerServiceClient,
  workerServiceDefinition,
  type Capabilities__Output,
  type HelloRequest__Output,
  type HelloResponse__Output,
  type LeaseRef__Output,
  type ModelLanguages__Output,
} from '@sonar/proto';
import { describe, expect, expectTypeOf, it } from 'vitest';

/**
 * proto/generated/ is committed (so `tsc -b` works on a fresh clone and in the Dockerfile) and
 * must be what proto-loader-gen-types makes of worker.proto today: this is the CI check.
 */

const run = promisify(execFile);
/** How promisified execFile rejects when the script exits non-zero. */
type RunFailure = { code: number; stderr: string };
const protoDir = path.resolve(import.meta.dirname, '..');
const repoRoot = path.resolve(protoDir, '..');

describe('generated protocol types', () => {
  it('are up to date with worker.proto and the loader options', async () => {
    const res = await run(process.execPath, [path.join(protoDir, 'scripts/generate.mjs'), '--check']).then(
      (r) => ({ code: 0, stderr: r.stderr }),
      (err: unknown) => {
        const { code, stderr } = err as RunFailure;
        return { code, stderr };
      },
    );
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
  });

  it('--check fails, naming the file, when worker.proto changed without regenerating; a run regenerates', async () => {
    // A copy of the package beside the repository's node_modules (the generator resolves @grpc/* from there).
    await mkdir(path.join(repoRoot, 'node_modules/.cache'), { recursive: true });
    const copy = await mkdtemp(path.join(repoRoot, 'node_modules/.cache/proto-gen-'));
    try {
      for (const f of ['worker.proto', 'index.js', 'package.json', 'scripts', 'generated'])
        await cp(path.join(protoDir, f), path.join(copy, f), { recursive: true });
      const proto = await readFile(path.join(copy, 'worker.proto'), 'utf8');
      await writeFile(path.join(copy, 'worker.proto'), proto.replace('message ProgressAck {\n', 'message ProgressAck {\n  string note = 99;\n'));
      const script = path.join(copy, 'scripts/generate.mjs');
      const stale = await run(process.execPath, [script, '--check']).then(
        () => ({ code: 0, stderr: '' }),
        (err: unknown) => {
          const { code, stderr } = err as RunFailure;
          return { code, stderr };
        },
      );
      expect(stale.code).toBe(1);
      expect(stale.stderr).toContain('differs or missing: generated/sonar/worker/v1/ProgressAck.d.ts');
      expect(stale.stderr).toContain('npm run generate -w proto');

      await run(process.execPath, [script]);
      expect(await readFile(path.join(copy, 'generated/sonar/worker/v1/ProgressAck.d.ts'), 'utf8')).toContain("'note': (string);");
      await run(process.execPath, [script, '--check']);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it('include the fields added lately (HelloRequest.held_leases, Capabilities.model_languages)', () => {
    expectTypeOf<HelloRequest__Output['held_leases']>().toEqualTypeOf<LeaseRef__Output[]>();
    expectTypeOf<Capabilities__Output['model_languages']>().toEqualTypeOf<ModelLanguages__Output[]>();
    // int64 decoded as a number (longs: Number).
    expectTypeOf<HelloResponse__Output['server_time_unix_ms']>().toEqualTypeOf<number>();
  });

  it('describe what the loader decodes: every field present, 64-bit integers as numbers', () => {
    const def = workerServiceDefinition();
    expect(Object.keys(def).sort()).toEqual(['Claim', 'Complete', 'FetchMedia', 'Heartbeat', 'Hello', 'Release', 'ReportProgress']);
    expect(def.Hello.path).toBe('/sonar.worker.v1.WorkerService/Hello');

    const sent = def.Hello.requestSerialize({
      contract_version: 2,
      held_leases: [{ job_id: 7, attempt: 1, lease_token: 't' }],
      capabilities: { models: ['m'], model_languages: [{ model: 'm', languages: ['en'] }] },
    });
    const got: HelloRequest__Output = def.Hello.requestDeserialize(sent);
    expect(got).toEqual({
      contract_version: 2,
      agent_version: '',
      hostname: '',
      local: false,
      probe: false,
      held_leases: [{ job_id: 7, attempt: 1, lease_token: 't' }],
      capabilities: {
        models: ['m'],
        engines: [],
        diarization: false,
        diarization_engine: '',
        diarization_error: '',
        can_fetch_urls: false,
        device: '',
        model_languages: [{ model: 'm', languages: ['en'] }],
      },
    });
    // Contract 3: a diarization result keeps its turns (doubles and a uint32 speaker).
    const complete = def.Complete.requestDeserialize(
      def.Complete.requestSerialize({ success: true, diarization: { state: 'completed', speaker_count: 2, turns: [{ start: 0.5, end: 2.25, speaker: 1 }] } }),
    );
    expect(complete.diarization).toEqual({ state: 'completed', engine: '', speaker_count: 2, turns: [{ start: 0.5, end: 2.25, speaker: 1 }], error: '' });
    const res: HelloResponse__Output = def.Hello.responseDeserialize(def.Hello.responseSerialize({ server_time_unix_ms: '1700000000123' }));
    expect(res.server_time_unix_ms).toBe(1_700_000_000_123);
  });

  it('give a client with every method', () => {
    const client = createWorkerServiceClient('127.0.0.1:1', grpc.credentials.createInsecure());
    try {
      expect(client).toBeInstanceOf(grpc.Client);
      for (const m of ['Hello', 'Heartbeat', 'Claim', 'ReportProgress', 'Complete', 'Release', 'FetchMedia'] as const)
        expect(typeof client[m]).toBe('function');
    } finally {
      client.close();
    }
  });
});
