import type { RetranscriptionState } from './retranscription.js';
import type { RevisionRow, RevisionSegment } from './revision-repository.js';
import { presentDiarization, speakerAwareTranscript, speakerName, speakerStats } from './speakers.js';
import { presentAnalysis, type presentTranslation } from './presenter.js';
import type { AnalysisRecord } from './entities.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** One earlier completed pass, read-only: transcript, segments with speaker names, speaker view, diarization. */
export function presentRevision(revision: RevisionRow, segments: RevisionSegment[], includeSegments: boolean) {
  const labels = revision.speakerLabels;
  return {
    pass: revision.pass,
    model: revision.model,
    language: revision.language,
    engine: revision.engine,
    engine_model: revision.engineModel,
    transcript_text: revision.transcriptText,
    duration_seconds: revision.durationSeconds,
    completed_at: iso(revision.completedAt),
    archived_at: revision.archivedAt.toISOString(),
    // The one segment count (transitions/segment-count.ts): the segments that hold text.
    segment_count: segments.filter((s) => /\S/.test(s.text)).length,
    ...(includeSegments
      ? {
          segments: segments.map((s) => ({
            seq: s.seq,
            start: s.start,
            end: s.end,
            text: s.text,
            speaker: s.speaker,
            speaker_name: s.speaker ? speakerName(s.speaker, labels) : null,
          })),
        }
      : {}),
    speaker_aware_transcript: speakerAwareTranscript(segments, labels),
    diarization: presentDiarization(revision.diarization, labels, speakerStats(segments)),
    speaker_labels: labels,
    // The pass's analysis record as it was archived; translations are archived in their presented shape.
    analysis: presentAnalysis(revision.analysis as AnalysisRecord | null),
    translations: revision.translations as Array<ReturnType<typeof presentTranslation>>,
  };
}

/** GET /api/speech/jobs/{jobId}/revisions: the current pass, the choices for a new one, and the history. */
export function presentRetranscription(state: RetranscriptionState, opts: { includeSegments: boolean }) {
  const { job } = state;
  return {
    ok: true as const,
    job_id: job.id,
    current: {
      pass: job.currentPass,
      model: job.model,
      language: job.language,
      status: job.status,
      engine: job.engine,
      completed_at: job.status === 'completed' ? iso(job.finishedAt) : null,
    },
    models: state.models,
    can_start: state.canStart,
    unavailable_reason: state.unavailableReason,
    revisions: state.revisions.map((r) => presentRevision(r.revision, r.segments, opts.includeSegments)),
  };
}
