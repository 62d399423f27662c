/**
 * Runs an outbox's drain one pass at a time: `kick()` starts a pass, or, while one runs, asks for
 * exactly one more right after it (so a row written during a pass is never left behind); a timer
 * kicks it every `pollMs` as well (rows another coordinator wrote, or a pass that failed). A failed
 * pass is logged and retried on the next kick. Shared by the notification outbox and the AI task
 * outbox.
 */
export class DrainLoop {
  private running: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly drain: () => Promise<unknown>,
    private readonly onError: (err: unknown) => void,
  ) {}

  start(pollMs: number) {
    this.timer = setInterval(this.kick, pollMs);
    this.timer.unref();
    this.kick();
  }

  get isClosed() {
    return this.closed;
  }

  readonly kick = () => {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drain()
      .then(() => undefined)
      .catch(this.onError)
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  };

  /** No more passes; waits for the one in progress. */
  async close() {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
