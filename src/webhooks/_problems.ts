/**
 * The store problems a dispatcher met since it started, counted by code, for
 * `/health`. Private to `src/webhooks`.
 *
 * @module
 */

/** Something wrong with the store that `/health` reports (the instance is degraded). */
export interface DeliveryProblem {
  /**
   * Stable code: `DELIVERY_BODY_MISSING` (deliveries whose event body was
   * gone) or `WEBHOOK_SECRET_UNREADABLE` (webhooks whose signing secret this
   * process cannot decrypt: their deliveries are dead-lettered).
   */
  code: "DELIVERY_BODY_MISSING" | "WEBHOOK_SECRET_UNREADABLE";
  message: string;
  /** Deliveries affected since start. */
  count: number;
  /** ISO-8601 time it was first seen. */
  since: string;
}

/** The problems met so far, one per code. */
export class Problems {
  #problems = new Map<DeliveryProblem["code"], DeliveryProblem>();
  #now: () => number;

  /** @param now Clock in epoch milliseconds. */
  constructor(now: () => number) {
    this.#now = now;
  }

  /** Copies of the problems met so far. */
  list(): DeliveryProblem[] {
    return [...this.#problems.values()].map((problem) => ({ ...problem }));
  }

  /** Adds `count` deliveries to a problem `problems()` reports (and `/health` with it). */
  note(
    code: DeliveryProblem["code"],
    message: (count: number) => string,
    count: number,
  ): void {
    const problem = this.#problems.get(code);
    const total = (problem?.count ?? 0) + count;
    this.#problems.set(code, {
      code,
      message: message(total),
      count: total,
      since: problem?.since ?? new Date(this.#now()).toISOString(),
    });
  }
}
