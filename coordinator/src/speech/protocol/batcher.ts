/**
 * Group commit for one kind of database write: requests that arrive while a batch is being written
 * wait and go together in the next batch (one statement for all of them). Nothing waits on a
 * timer: a lone request is written at once, and under load the batches grow by themselves, which
 * divides the per-statement cost (round trip, executor start, commit) among the requests.
 */
export class Batcher<Req, Res> {
  private queue: Array<{ req: Req; resolve: (res: Res) => void; reject: (err: unknown) => void }> = [];
  private running = false;

  constructor(
    /** Writes one batch; returns one result (or Error, rejected for that request alone) per request, in order. */
    private readonly write: (reqs: Req[]) => Promise<Array<Res | Error>>,
    private readonly maxBatch = 64,
  ) {}

  submit(req: Req): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      this.queue.push({ req, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain() {
    this.running = true;
    try {
      while (this.queue.length) {
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          const results = await this.write(batch.map((b) => b.req));
          batch.forEach((b, i) => {
            const r = results[i];
            if (r instanceof Error) b.reject(r);
            else b.resolve(r as Res);
          });
        } catch (err) {
          for (const b of batch) b.reject(err);
        }
      }
    } finally {
      this.running = false;
    }
  }
}
