/**
 * Reading the audit log: the head, one entry, paged and filtered lists, and
 * the streaming scan `toolgate audit export` writes out.
 *
 * @module
 */
import { GatewayError } from "../errors/mod.ts";
import type { AuditBytesFilter, AuditRecord, Store } from "../store/mod.ts";
import { CANONICAL_START, mayContain, readEntry, UnreadableEntryError } from "./_codec.ts";
import { type AuditEntry, GENESIS_HASH } from "./entry.ts";

/** Default page size of {@linkcode AuditLog.list}. */
export const DEFAULT_LIST_LIMIT = 100;

/** Largest page size of {@linkcode AuditLog.list}. */
export const MAX_LIST_LIMIT = 1000;

/**
 * Most entries one {@linkcode AuditLog.list} call examines when filtering;
 * past it the page is returned short, with `next_after` to continue from.
 */
export const MAX_LIST_SCAN = 10_000;

/** The head of the chain. */
export interface AuditHeadInfo {
  /** Seq of the last entry; 0 for an empty log. */
  head_seq: number;
  /** `entry_hash` of the last entry; {@linkcode GENESIS_HASH} for an empty log. */
  head_hash: string;
}

/** Filters of {@linkcode AuditLog.entries} and {@linkcode AuditLog.list}. */
export interface AuditEntriesOptions {
  /** Only entries with a seq above this one. @default 0 */
  after?: number;
  /** Only entries of this tool. @default all */
  tool?: string;
  /** Only entries of this kind. @default all */
  kind?: string;
  /**
   * Only entries whose caller has this name or id (an API key's), or this
   * kind (`admin`, `local`, `key`, `oauth`). @default all
   */
  caller?: string;
  /** Only entries written at or after this time (a `Date`, ISO string or epoch ms). @default all */
  since?: Date | string | number;
}

/** Options of {@linkcode AuditLog.list}. */
export interface AuditListOptions extends AuditEntriesOptions {
  /** Most entries returned, 1 to {@linkcode MAX_LIST_LIMIT}. @default 100 */
  limit?: number;
  /**
   * Most entries examined, 1 to {@linkcode MAX_LIST_SCAN}: with filters, a
   * page ends there even when short (`next_after` says where to go on).
   * @default MAX_LIST_SCAN
   */
  maxScan?: number;
}

/** One page of {@linkcode AuditLog.list}. */
export interface AuditPage {
  /** Matching entries in seq order. */
  entries: AuditEntry[];
  /** Pass as `after` to read the next page; `null` when the end of the log was reached. */
  next_after: number | null;
}

function parseSince(since: Date | string | number): number {
  const ms = since instanceof Date
    ? since.getTime()
    : typeof since === "number"
    ? since
    : Date.parse(since);
  if (!Number.isFinite(ms)) {
    throw new GatewayError("USAGE", `Invalid since "${String(since)}": use an ISO 8601 time`);
  }
  return ms;
}

function checkSeq(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new GatewayError("USAGE", `Invalid ${name} ${value}: use a whole number of 0 or more`);
  }
  return value;
}

function decodeStored(record: AuditRecord): AuditEntry {
  try {
    if (!record.bytes) throw new UnreadableEntryError("a part is missing or is not bytes");
    return readEntry(record.bytes);
  } catch (error) {
    if (!(error instanceof UnreadableEntryError)) throw error;
    throw new GatewayError(
      "STORE_CORRUPT",
      `Audit entry ${record.seq} is unreadable: ${error.message}; run toolgate audit verify`,
      { details: { seq: record.seq } },
    );
  }
}

/** The reads of one store's audit log, for `AuditLog` (audit_log.ts). */
export class AuditReader {
  #store: Store;

  /** @param store The store holding the log. */
  constructor(store: Store) {
    this.#store = store;
  }

  /** The head of the chain: seq and hash of the last entry. */
  async head(): Promise<AuditHeadInfo> {
    const { head } = await this.#store.audit.readHead();
    return { head_seq: head?.seq ?? 0, head_hash: head?.hash ?? GENESIS_HASH };
  }

  /** How far entries were pruned (`toolgate audit prune`), or `null` when never. */
  pruned(): Promise<{ through: number; hash: string } | null> {
    return this.#store.audit.readPruned();
  }

  /**
   * One entry by seq, or `null` when none is stored there.
   *
   * @throws {GatewayError} `STORE_CORRUPT` when the stored entry is unreadable.
   */
  async get(seq: number): Promise<AuditEntry | null> {
    const record = await this.#store.audit.readRecord(checkSeq(seq, "seq"));
    return record ? decodeStored(record) : null;
  }

  /**
   * Streams matching entries in seq order, one KV page at a time, to the end
   * of the log (entries appended meanwhile included): what
   * `toolgate audit export` writes out.
   *
   * @throws {GatewayError} `USAGE` for a bad filter, `STORE_CORRUPT` at an
   * unreadable entry.
   *
   * @example
   * ```ts
   * for await (const entry of log.entries({ tool: "echo" })) console.log(JSON.stringify(entry));
   * ```
   */
  async *entries(options: AuditEntriesOptions = {}): AsyncGenerator<AuditEntry> {
    for await (const item of this.#scan(options, await this.#start(options))) {
      if (item.matches) yield item.entry;
    }
  }

  /**
   * One page of entries, for `GET /audit` and `toolgate audit list`. Pages
   * by seq: pass `next_after` back as `after`. With filters, at most
   * `maxScan` entries (default {@linkcode MAX_LIST_SCAN}) are examined per call, so a page can be
   * short while `next_after` is not `null`.
   *
   * @throws {GatewayError} `USAGE` for a bad limit or filter,
   * `STORE_CORRUPT` at an unreadable entry.
   */
  async list(options: AuditListOptions = {}): Promise<AuditPage> {
    const { limit = DEFAULT_LIST_LIMIT, maxScan = MAX_LIST_SCAN } = options;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
      throw new GatewayError(
        "USAGE",
        `Invalid limit ${limit}: use a whole number from 1 to ${MAX_LIST_LIMIT}`,
      );
    }
    if (!Number.isInteger(maxScan) || maxScan < 1 || maxScan > MAX_LIST_SCAN) {
      throw new GatewayError(
        "USAGE",
        `Invalid maxScan ${maxScan}: use a whole number from 1 to ${MAX_LIST_SCAN}`,
      );
    }
    const { tool, kind, caller, since } = options;
    const filtered = tool !== undefined || kind !== undefined || caller !== undefined ||
      since !== undefined;
    const after = await this.#start(options);
    const entries: AuditEntry[] = [];
    if (!filtered) {
      const pages = { first: Math.max(16, limit), then: 1000 };
      for await (const item of this.#scan(options, after, pages)) {
        if (item.matches) entries.push(item.entry);
        if (entries.length === limit || entries.length === maxScan) {
          return { entries, next_after: item.seq };
        }
      }
      return { entries, next_after: null };
    }
    // The `maxScan` entries after `after` at most (seqs have no gaps), read a
    // page at a time: 4 × limit first (a filter that matches often fills the
    // page from it), then twice as many each time.
    const bound = after + maxScan;
    const pages = {
      first: Math.max(16, Math.min(4 * limit, maxScan)),
      then: Math.max(16, Math.min(1000, maxScan)),
      before: bound + 1,
    };
    for await (const item of this.#scan(options, after, pages)) {
      if (!item.matches) continue;
      entries.push(item.entry);
      if (entries.length === limit) return { entries, next_after: item.seq };
    }
    const { head } = await this.#store.audit.readHead();
    return { entries, next_after: (head?.seq ?? 0) > bound ? bound : null };
  }

  /** Where a scan starts: after `after`, or past the entries older than `since`. */
  async #start(options: AuditEntriesOptions): Promise<number> {
    const after = checkSeq(options.after ?? 0, "after");
    if (options.since === undefined) return after;
    return Math.max(after, await this.#lastSeqBefore(parseSince(options.since), after));
  }

  async *#scan(
    options: AuditEntriesOptions,
    after: number,
    pages?: { first: number; then: number; before?: number },
  ): AsyncGenerator<
    { seq: number; matches: true; entry: AuditEntry } | { seq: number; matches: false }
  > {
    const { tool, kind, caller } = options;
    const since = options.since === undefined ? undefined : parseSince(options.since);
    // Canonical bytes lacking a filter's member are skipped without parsing
    // them (on PostgreSQL, without reading them).
    const needles = [
      ...(tool === undefined ? [] : [`"tool":${JSON.stringify(tool)}`]),
      ...(kind === undefined ? [] : [`"kind":${JSON.stringify(kind)}`]),
      ...(caller === undefined ? [] : [JSON.stringify(caller)]),
    ];
    const skip = needles.length ? { prefix: CANONICAL_START, needles } : undefined;
    for await (const page of this.#pages(after, pages, skip)) {
      for (const record of page) {
        if (needles.length && record.bytes && !mayContain(record.bytes, needles)) {
          yield { seq: record.seq, matches: false };
          continue;
        }
        const entry = decodeStored(record);
        const matches = (tool === undefined || entry.tool === tool) &&
          (kind === undefined || entry.kind === kind) &&
          (caller === undefined || callerMatches(entry, caller)) &&
          (since === undefined || Date.parse(entry.timestamp) >= since);
        yield matches ? { seq: entry.seq, matches, entry } : { seq: entry.seq, matches };
      }
    }
  }

  /**
   * Stored entries after `after` (and before `sizes.before`), a page at a
   * time: the first of `sizes.first` parts, each next one twice as large up
   * to `sizes.then`.
   */
  async *#pages(
    after: number,
    sizes?: { first: number; then: number; before?: number },
    skip?: AuditBytesFilter,
  ): AsyncGenerator<AuditRecord[]> {
    const before = sizes?.before;
    if (!sizes || sizes.first >= sizes.then) {
      yield* this.#store.audit.pages({ after, before, pageSize: sizes?.then, skip });
      return;
    }
    let from = after;
    for (let size = sizes.first; size < sizes.then; size = Math.min(sizes.then, size * 2)) {
      const pages = this.#store.audit.pages({ after: from, before, pageSize: size, skip });
      const page = await pages.next();
      await pages.return(undefined);
      const last = page.done ? undefined : page.value.at(-1)?.seq;
      if (last === undefined) return;
      yield page.value;
      from = last;
    }
    yield* this.#store.audit.pages({ after: from, before, pageSize: sizes.then, skip });
  }

  /**
   * Binary search for the last seq written before `since` (timestamps never
   * decrease along the chain), so a `since` filter skips old entries without
   * reading them. Falls back to `after` at any entry it cannot read.
   */
  async #lastSeqBefore(since: number, after: number): Promise<number> {
    const { head } = await this.#store.audit.readHead();
    let low = after + 1;
    let high = (head?.seq ?? 0) + 1;
    while (low < high) {
      const middle = Math.floor((low + high) / 2);
      const record = await this.#store.audit.readRecord(middle);
      if (!record?.bytes) return after;
      let timestamp: number;
      try {
        timestamp = Date.parse(readEntry(record.bytes).timestamp);
      } catch (error) {
        if (error instanceof UnreadableEntryError) return after;
        throw error;
      }
      if (!(timestamp >= since)) low = middle + 1;
      else high = middle;
    }
    return low - 1;
  }
}

/** Whether an entry's caller has the name, id or kind `caller`. */
function callerMatches(entry: AuditEntry, caller: string): boolean {
  const who = entry.caller;
  if (!who) return false;
  return who.name === caller || who.id === caller || who.kind === caller;
}
