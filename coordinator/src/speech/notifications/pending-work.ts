/**
 * Work a synchronous listener starts and does not wait for (the lease service's terminal events
 * queue deliveries), tracked so that shutdown can wait for it.
 */
export class PendingWork {
  private readonly pending = new Set<Promise<unknown>>();
  private closed = false;

  /** Starts `work` unless closed; a failure goes to `onError`, never to the caller. */
  start(work: () => Promise<unknown>, onError: (err: unknown) => void): void {
    if (this.closed) return;
    const p = work()
      .catch(onError)
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** Refuses new work and waits for what is running. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.pending]);
  }
}
