/**
 * Where a dispatcher is in its life (new, running, stopping, stopped), with
 * the background work that `stop()` and `whenIdle()` wait for. Private to
 * `src/webhooks`.
 *
 * @module
 */

/** A dispatcher's state. */
export type DispatcherState = "new" | "running" | "stopping" | "stopped";

/** The dispatcher's state, its background tasks and who waits for it to be idle. */
export class Lifecycle {
  #state: DispatcherState = "new";
  #tasks = new Set<Promise<void>>();
  #idleWaiters: (() => void)[] = [];
  #onError: (error: unknown) => void;
  #quiet: () => boolean;

  /**
   * @param onError Where a background task's failure is reported.
   * @param quiet Whether nothing is held, running or due (background tasks aside).
   */
  constructor(onError: (error: unknown) => void, quiet: () => boolean) {
    this.#onError = onError;
    this.#quiet = quiet;
  }

  get state(): DispatcherState {
    return this.#state;
  }

  /** Whether the dispatcher is running (neither new nor stopping nor stopped). */
  get running(): boolean {
    return this.#state === "running";
  }

  /** Moves to `state`. */
  enter(state: DispatcherState): void {
    this.#state = state;
  }

  /** Resolves once the dispatcher is idle (see {@linkcode Lifecycle.checkIdle}). */
  whenIdle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Whether background tasks are running. */
  get busy(): boolean {
    return this.#tasks.size > 0;
  }

  /** Resolves once the background tasks running now are done (`stop()` loops while `busy`). */
  tasks(): Promise<void[]> {
    return Promise.all(this.#tasks);
  }

  /** Stopped, or nothing held, running or due in the store (the last claim came back short). */
  #isIdle(): boolean {
    return this.#state === "stopped" || (this.#quiet() && this.#tasks.size === 0);
  }

  /** Wakes those waiting in `whenIdle()` if the dispatcher is idle now. */
  checkIdle(): void {
    if (!this.#idleWaiters.length || !this.#isIdle()) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  /** Runs background work, reporting its failure; `stop()` and `whenIdle()` wait for it. */
  background(work: Promise<unknown>): void {
    const task: Promise<void> = work.then(
      () => undefined,
      (error) => this.#onError(error),
    ).finally(() => {
      this.#tasks.delete(task);
      this.checkIdle();
    });
    this.#tasks.add(task);
  }
}
