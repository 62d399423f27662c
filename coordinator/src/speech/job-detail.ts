import type { SpeechDeps } from '../deps.js';
import type { SpeechJob } from './jobs/entities.js';
import { presentJobDetail } from './jobs/presenter.js';

/**
 * The job as GET /api/speech/jobs/{jobId} answers it: the detail (lease, log, speakers, AI work)
 * and whether a connected worker can take it, both read now. Every route that answers with the
 * job detail goes through this one function.
 */
export function jobDetailPresenter(deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const { config } = deps;
  const { jobs, models } = deps.speech;
  return async (job: SpeechJob) => {
    const [detail, availability] = await Promise.all([jobs.detail(job), models.snapshot()]);
    return presentJobDetail(job, detail, {
      unresponsiveAfterSeconds: config.SPEECH_UNRESPONSIVE_AFTER_SECONDS,
      publicBaseUrl: config.PUBLIC_BASE_URL,
      availability,
    });
  };
}
