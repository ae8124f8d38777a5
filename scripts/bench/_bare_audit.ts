/**
 * The least a durably audited call can write, for the bare baselines: one
 * chained record in its own Deno KV atomic commit (checked on a head key, as
 * an audit append is), appends one after another as a single appender
 * without group commit would. Used by `_bare_mcp.ts` and `_bare_hono.ts`
 * when asked for `commit`.
 *
 * @module
 */

const encoder = new TextEncoder();

/** Appends records to `kv`, one commit each, one at a time. */
export class BareAuditLog {
  #kv: Deno.Kv;
  #seq = 0;
  #head: string | null = null;
  #tail: Promise<void> = Promise.resolve();

  /** @param kv The database; this log must be its only writer of `["head"]`. */
  constructor(kv: Deno.Kv) {
    this.#kv = kv;
  }

  /** Resolves once a record of the call is committed. */
  append(tool: string, input: unknown): Promise<void> {
    const next = this.#tail.then(() => this.#commit(tool, input));
    this.#tail = next.catch(() => {});
    return next;
  }

  async #commit(tool: string, input: unknown): Promise<void> {
    const seq = this.#seq + 1;
    const bytes = encoder.encode(JSON.stringify({ seq, tool, input }));
    const result = await this.#kv.atomic()
      .check({ key: ["head"], versionstamp: this.#head })
      .set(["log", seq], bytes)
      .set(["head"], seq)
      .commit();
    if (!result.ok) throw new Error("The head moved: the bare audit log must be the only writer");
    this.#seq = seq;
    this.#head = result.versionstamp;
  }
}
