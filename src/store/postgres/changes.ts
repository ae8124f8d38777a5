/**
 * Change notification across instances on PostgreSQL, with `LISTEN/NOTIFY`:
 * counter changes (`toolgate_changes`, sent by {@linkcode bumpCounter} in
 * the writer's transaction, so only on commit) and event envelopes for every
 * instance's `/events` (`toolgate_events`). A notification's payload holds
 * less than 8000 bytes: a larger envelope goes through a small table and the
 * notification carries its row id.
 *
 * @module
 */
import type { ChangeFeed, ChangeName } from "../store.ts";
import type { PgContext } from "./_context.ts";

/** Tables of change notification, in migration 1. */
export const CHANGES_SCHEMA = `
  create table toolgate_event_feed (
    id bigserial primary key,
    envelope text not null,
    created_at timestamptz not null default now()
  );
`;

/** Channel of counter changes; the payload is the counter's name. */
export const CHANGES_CHANNEL = "toolgate_changes";

/** Channel of event envelopes: `<origin> <json>` or `<origin> #<feed row id>`. */
export const EVENTS_CHANNEL = "toolgate_events";

/** Largest envelope sent inside a notification, in bytes (PostgreSQL allows 7999). */
const INLINE_MAX_BYTES = 7000;

/** How long rows of large envelopes are kept for listeners to read. */
const FEED_KEEP_SECONDS = 60;

const encoder = new TextEncoder();

/** The PostgreSQL {@linkcode ChangeFeed}: listens lazily, on one connection of its own. */
export class PgChangeFeed implements ChangeFeed {
  readonly pushed = true;
  #ctx: PgContext;
  #origin = crypto.randomUUID();
  #changes = new Set<(name: ChangeName) => void>();
  #events = new Set<(envelope: string) => void>();
  #listening: Promise<{ unlisten(): Promise<void> }[]> | null = null;
  #onError: (error: unknown) => void;
  #published = 0;

  /**
   * @param ctx The adapter's context.
   * @param onError Where failures of listening are reported. @default console.error
   */
  constructor(ctx: PgContext, onError: (error: unknown) => void = (error) => console.error(error)) {
    this.#ctx = ctx;
    this.#onError = onError;
  }

  subscribe(listener: (name: ChangeName) => void): () => void {
    this.#changes.add(listener);
    this.#listen();
    return () => this.#changes.delete(listener);
  }

  subscribeEvents(listener: (envelope: string) => void): () => void {
    this.#events.add(listener);
    this.#listen();
    return () => this.#events.delete(listener);
  }

  async publishEvents(envelopes: readonly string[]): Promise<void> {
    if (!envelopes.length) return;
    const inline: string[] = [];
    const large: string[] = [];
    for (const envelope of envelopes) {
      if (encoder.encode(envelope).byteLength <= INLINE_MAX_BYTES) {
        inline.push(`${this.#origin} ${envelope}`);
      } else large.push(envelope);
    }
    await this.#ctx.run(async (sql) => {
      if (large.length) {
        const rows = await sql<{ id: string }[]>`
          insert into toolgate_event_feed (envelope)
          select * from unnest(${large}::text[]) returning id::text`;
        for (const { id } of rows) inline.push(`${this.#origin} #${id}`);
        if (++this.#published % 100 === 1) {
          await sql`delete from toolgate_event_feed
            where created_at < now() - make_interval(secs => ${FEED_KEEP_SECONDS})`;
        }
      }
      await sql`select pg_notify(${EVENTS_CHANNEL}, payload)
        from unnest(${inline}::text[]) as payload`;
    });
  }

  /** Stops listening (the store closes). */
  async close(): Promise<void> {
    const listening = this.#listening;
    this.#listening = null;
    if (!listening) return;
    const handles = await listening.catch(() => []);
    await Promise.all(handles.map((handle) => handle.unlisten().catch(() => {})));
  }

  #listen(): void {
    if (this.#listening) return;
    const sql = this.#ctx.sql;
    this.#listening = Promise.all([
      sql.listen(CHANGES_CHANNEL, (payload) => {
        if (payload !== "registrations" && payload !== "deliveries") return;
        for (const listener of this.#changes) listener(payload);
      }),
      sql.listen(EVENTS_CHANNEL, (payload) => this.#onEvent(payload)),
    ]);
    this.#listening.catch((error) => {
      this.#listening = null;
      this.#onError(error);
    });
  }

  #onEvent(payload: string): void {
    const space = payload.indexOf(" ");
    if (space < 0 || payload.slice(0, space) === this.#origin || !this.#events.size) return;
    const body = payload.slice(space + 1);
    if (!body.startsWith("#")) {
      for (const listener of this.#events) listener(body);
      return;
    }
    this.#ctx.run((sql) =>
      sql<{ envelope: string }[]>`select envelope from toolgate_event_feed where id = ${
        body.slice(1)
      }`
    ).then(([row]) => {
      if (!row) return;
      for (const listener of this.#events) listener(row.envelope);
    }, this.#onError);
  }
}
