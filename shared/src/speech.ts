/** Speech job states and their display labels (the API's `status_label`). */
export const JOB_STATUSES = ['queued', 'downloading', 'transcribing', 'finalizing', 'completed', 'failed'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export const JOB_STATUS_LABELS: Record<JobStatus, string> = {
  queued: 'Queued',
  downloading: 'Downloading',
  transcribing: 'Transcribing',
  finalizing: 'Finalizing',
  completed: 'Completed',
  failed: 'Failed',
};

export const QUEUE_CHANNELS = ['web', 'api'] as const;
export type QueueChannel = (typeof QUEUE_CHANNELS)[number];
export const QUEUE_CHANNEL_LABELS: Record<QueueChannel, string> = {
  web: 'Web queue',
  api: 'API queue',
};

export const DIARIZATION_STATES = ['pending', 'running', 'completed', 'failed', 'unavailable', 'skipped'] as const;
export type DiarizationState = (typeof DIARIZATION_STATES)[number];

export const LIVENESS_STATES = ['inactive', 'active', 'quiet', 'unresponsive', 'stale', 'suspect'] as const;
export type LivenessState = (typeof LIVENESS_STATES)[number];

/** Model names the product knows about; a runtime advertises which of them it really has. */
export const SPEECH_MODELS = ['small', 'large', 'turbo'] as const;
export type SpeechModel = (typeof SPEECH_MODELS)[number];

/** ggml weight files whisper.cpp loads for each model name the product offers, in order of preference. */
export const WHISPER_MODEL_FILES: Readonly<Record<SpeechModel, readonly string[]>> = {
  small: ['ggml-small.bin', 'ggml-small.en.bin'],
  large: ['ggml-large-v3.bin', 'ggml-large-v2.bin', 'ggml-large.bin'],
  turbo: ['ggml-large-v3-turbo.bin'],
};

/** The model name of the PocketSphinx engine (Debian's US English model: it hears English only). */
export const POCKETSPHINX_MODEL = 'pocketsphinx-en-us';
