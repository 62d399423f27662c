import { Argument, Command, Option } from 'commander';

/**
 * The worker agent's command line: every option with its environment variable and default.
 * bin.ts parses it; docs/configuration.md is generated from it (`npm run docs:config`).
 */
export function workerCommand(version: string): Command {
  return new Command()
    .name('sonar-worker')
    .description('Speech worker agent: connects to a Sonar coordinator over gRPC and runs transcription jobs.')
    .version(version)
    .addArgument(
      new Argument(
        '[command]',
        'doctor: check this host (ffmpeg, engines and models, diarizer, GPU, disk) and the coordinator and secret, print a table, exit 1 on a failure',
      ).choices(['doctor']),
    )
    .addOption(new Option('--coordinator <host:port>', 'coordinator gRPC address').env('COORDINATOR_GRPC_URL').default('127.0.0.1:50051'))
    .addOption(new Option('--secret <secret>', 'worker secret from `npm run cli -- worker:create NAME`').env('WORKER_SECRET'))
    .addOption(new Option('--secret-file <path>', 'read the worker secret from a file').env('WORKER_SECRET_FILE'))
    .addOption(new Option('--models-dir <path>', 'folder with whisper.cpp ggml model files').env('WHISPER_MODELS_DIR'))
    .addOption(new Option('--device <name>', 'compute device to advertise (cpu, cuda:0, ...)').env('WORKER_DEVICE').default('cpu'))
    .addOption(new Option('--no-fetch-urls', 'do not download external source URLs; ask the coordinator for media').env('WORKER_NO_FETCH_URLS'))
    .addOption(
      new Option(
        '--outbound-allow-ranges <cidrs>',
        "comma-separated CIDRs that source downloads may reach although private, loopback or link-local (like the coordinator's OUTBOUND_ALLOW_RANGES)",
      ).env('SONAR_OUTBOUND_ALLOW_RANGES'),
    )
    .addOption(new Option('--tls', 'use TLS to reach the coordinator').env('COORDINATOR_TLS'))
    .addOption(new Option('--local', "this is the coordinator host's own local runner").env('WORKER_LOCAL'))
    .addOption(new Option('--work-dir <path>', 'folder for temporary media while a job runs').env('WORKER_WORK_DIR'))
    .addOption(
      new Option('--shutdown-grace-ms <ms>', 'on SIGTERM, how long the running job may finish before it is handed back')
        .env('WORKER_SHUTDOWN_GRACE_MS')
        .default('60000'),
    )
    .addOption(
      new Option('--diarization <engine>', 'speaker diarization engine: default (needs no download), sherpa-onnx (needs the two model paths), off')
        .choices(['default', 'sherpa-onnx', 'off'])
        .env('WORKER_DIARIZATION')
        .default('default'),
    )
    .addOption(
      new Option('--diarization-segmentation-model <path>', 'sherpa-onnx: pyannote segmentation ONNX model (e.g. pyannote-segmentation-3.0)').env(
        'WORKER_DIARIZATION_SEGMENTATION_MODEL',
      ),
    )
    .addOption(
      new Option('--diarization-embedding-model <path>', 'sherpa-onnx: speaker embedding ONNX model (e.g. 3D-Speaker or NeMo)').env(
        'WORKER_DIARIZATION_EMBEDDING_MODEL',
      ),
    )
    .addOption(new Option('--presence-only', 'connect and keep presence but claim no jobs').env('WORKER_PRESENCE_ONLY'))
    .addOption(
      new Option(
        '--exit-with-parent',
        "stop at once when the process that started this one exits (the quick start's local runner; give it a pipe as stdin that the parent keeps open)",
      ).env('WORKER_EXIT_WITH_PARENT'),
    );
}
