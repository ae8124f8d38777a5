/**
 * Contract: the stored audit chain. One chain per store, whatever the number
 * of handles appending; a commit lands only on the head it was sealed on.
 *
 * @module
 */
import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { createAuditLog } from "../../../src/audit/mod.ts";
import { GatewayError } from "../../../src/errors/mod.ts";
import type {
  AuditCommitGuard,
  AuditEntryWrite,
  AuditHead,
  AuditRecord,
  Store,
} from "../../../src/store/mod.ts";
import type { ContractCase } from "./_contract.ts";

const encoder = new TextEncoder();

/** `length` random bytes (getRandomValues fills 64 KiB at a time). */
function randomBytes(length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let offset = 0; offset < length; offset += 65_536) {
    crypto.getRandomValues(bytes.subarray(offset, offset + 65_536));
  }
  return bytes;
}
const EMPTY_GUARD: AuditCommitGuard = { headVersionstamp: null, tailSeq: 0, tailVersionstamps: [] };
const TIMESTAMP = "2026-01-01T00:00:00.000Z";

/** A well-formed head hash (the store only checks the format). */
function fakeHash(n: number): string {
  return `sha256:${n.toString(16).padStart(64, "0")}`;
}

/** Entries `first`..`last` with recognizable bytes (`size` pads them). */
function entriesFrom(first: number, last: number, size = 0): AuditEntryWrite[] {
  const out: AuditEntryWrite[] = [];
  for (let seq = first; seq <= last; seq++) {
    const text = JSON.stringify({ seq, pad: "x".repeat(size) });
    out.push({ seq, bytes: encoder.encode(text) });
  }
  return out;
}

function headAt(seq: number): AuditHead {
  return { seq, hash: fakeHash(seq), timestamp: TIMESTAMP };
}

/** The guard of an appender that read the chain as it is now (what audit_log does). */
async function guardOf(store: Store, hintSeq = 0): Promise<AuditCommitGuard> {
  const { head, headVersionstamp, tail } = await store.audit.readChainState(hintSeq);
  return {
    headVersionstamp,
    tailSeq: head?.seq ?? 0,
    tailVersionstamps: tail?.versionstamps ?? [],
  };
}

async function allRecords(
  store: Store,
  options: Parameters<Store["audit"]["pages"]>[0] = {},
): Promise<{ records: AuditRecord[]; pages: number }> {
  const records: AuditRecord[] = [];
  let pages = 0;
  for await (const page of store.audit.pages(options)) {
    assert(page.length > 0, "no empty page is yielded");
    records.push(...page);
    pages++;
  }
  return { records, pages };
}

function seqsOf(records: readonly AuditRecord[]): number[] {
  return records.map(({ seq }) => seq);
}

function range(first: number, last: number): number[] {
  return Array.from({ length: Math.max(0, last - first + 1) }, (_, i) => first + i);
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>),
  );
  return `sha256:${Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/**
 * Appends `count` entries one at a time, like the audit log does: read the
 * chain, seal on its head, commit with the guard, re-read and retry on `null`.
 * Each entry names its writer and links to the hash of the entry before.
 */
async function appendLinked(store: Store, writer: string, count: number): Promise<number> {
  let retries = 0;
  for (let n = 0; n < count; n++) {
    for (let attempt = 0;; attempt++) {
      assert(attempt < 500, `${writer} kept losing the race`);
      const { head, headVersionstamp, tail } = await store.audit.readChainState();
      const seq = (head?.seq ?? 0) + 1;
      const bytes = encoder.encode(JSON.stringify({ seq, writer, n, prev: head?.hash ?? null }));
      const stamp = await store.audit.commit(
        { headVersionstamp, tailSeq: head?.seq ?? 0, tailVersionstamps: tail?.versionstamps ?? [] },
        [{ seq, bytes }],
        { seq, hash: await sha256Hex(bytes), timestamp: TIMESTAMP },
      );
      if (stamp !== null) break;
      retries++;
    }
  }
  return retries;
}

/** Cases of the audit chain. */
export const AUDIT_CONTRACT: readonly ContractCase[] = [
  {
    name: "audit: an empty log has no head, no tail and no entries",
    async run({ store }) {
      assertEquals(await store.audit.readHead(), { head: null, versionstamp: null });
      assertEquals(await store.audit.readHeadAndNext(0), { head: null, nextExists: false });
      assertEquals(await store.audit.readChainState(), {
        head: null,
        headVersionstamp: null,
        tail: null,
      });
      assertEquals(await store.audit.readRecord(1), null);
      assertEquals((await allRecords(store)).records, []);
    },
  },
  {
    name: "audit: commit() appends entries and moves the head; entries read back byte for byte",
    async run({ store, another }) {
      const first = entriesFrom(1, 3);
      // A large entry: several values in stores that split entries.
      first.push({ seq: 4, bytes: randomBytes(200_000) });
      const stamp = await store.audit.commit(EMPTY_GUARD, first, headAt(4));
      assert(typeof stamp === "string" && stamp.length > 0, "a commit returns its version stamp");

      const other = await another();
      assertEquals(await other.audit.readHead(), { head: headAt(4), versionstamp: stamp });
      assertEquals(await other.audit.readHeadAndNext(4), { head: headAt(4), nextExists: false });
      for (const { seq, bytes } of first) {
        const record = await other.audit.readRecord(seq);
        assert(record, `entry ${seq} is stored`);
        assertEquals(record.seq, seq);
        assert(record.bytes instanceof Uint8Array, "bytes are a Uint8Array");
        assertEquals(record.bytes, bytes);
        assert(record.versionstamps.length >= 1);
        assert(record.versionstamps.every((s) => s === stamp), "entries carry the commit's stamp");
      }
      assertEquals(await other.audit.readRecord(5), null);

      const state = await other.audit.readChainState(4);
      assertEquals(state.head, headAt(4));
      assertEquals(state.headVersionstamp, stamp);
      assertEquals(state.tail?.seq, 4);
      assertEquals(state.tail?.bytes, first[3].bytes);

      // A guard built from the read state, from another handle.
      const next = await other.audit.commit(
        {
          headVersionstamp: state.headVersionstamp,
          tailSeq: 4,
          tailVersionstamps: state.tail?.versionstamps ?? [],
        },
        entriesFrom(5, 6),
        headAt(6),
      );
      assert(next !== null && next !== stamp, "the second commit lands with a new stamp");

      // The guard the audit log keeps after a commit: one stamp per stored value of the tail.
      const tailParts = store.audit.entryCost(entriesFrom(6, 6)[0].bytes.length).mutations;
      const third = await store.audit.commit(
        { headVersionstamp: next, tailSeq: 6, tailVersionstamps: new Array(tailParts).fill(next) },
        entriesFrom(7, 7),
        headAt(7),
      );
      assert(third !== null, "a guard built from the last commit's stamp holds");
      assertEquals((await store.audit.readHead()).head, headAt(7));
      assertEquals(seqsOf((await allRecords(store)).records), range(1, 7));
    },
  },
  {
    name: "audit: a commit on a stale head or tail returns null and writes nothing",
    async run({ store }) {
      const staleEmpty = await guardOf(store);
      const stamp = await store.audit.commit(staleEmpty, entriesFrom(1, 2), headAt(2));
      assert(stamp !== null);
      const written = await store.audit.readRecord(1);

      // Another writer's guard read before that commit: the log was empty.
      assertEquals(await store.audit.commit(staleEmpty, entriesFrom(1, 1, 5), headAt(1)), null);
      const guard = await guardOf(store);
      const staged = store.incoming.stage(
        { id: "inj_stale", endpoint_id: "in_1", handler: "echo", received_at: TIMESTAMP },
        encoder.encode('{"a":1}'),
      );
      assert(staged);
      // A head stamp that is not the current one.
      const moved = await store.audit.commit(guard, entriesFrom(3, 3), headAt(3));
      assert(moved !== null);
      assertEquals(
        await store.audit.commit(guard, entriesFrom(4, 4), headAt(4), undefined, [staged.writes]),
        null,
      );
      // The right head, but the tail's stamps are not the tail's.
      const current = await guardOf(store);
      assertEquals(
        await store.audit.commit(
          { ...current, tailVersionstamps: current.tailVersionstamps.map(() => stamp) },
          entriesFrom(4, 4),
          headAt(4),
        ),
        null,
      );
      // The right head, but the tail expected absent.
      assertEquals(
        await store.audit.commit(
          { ...current, tailVersionstamps: [] },
          entriesFrom(4, 4),
          headAt(4),
        ),
        null,
      );

      assertEquals(await store.audit.readHead(), { head: headAt(3), versionstamp: moved });
      assertEquals(await store.audit.readRecord(1), written);
      assertEquals(await store.audit.readRecord(4), null);
      assertEquals(
        await store.incoming.list(),
        [],
        "staged writes of a failed commit are not written",
      );
      assertEquals(seqsOf((await allRecords(store)).records), [1, 2, 3]);
      // The current guard still works.
      assert(await store.audit.commit(current, entriesFrom(4, 4), headAt(4)) !== null);
    },
  },
  {
    name:
      "audit: an entry stored after the head is STORE_CORRUPT for appenders, and blocks a commit there",
    async run({ store }) {
      // The head says 1 while entries 1 and 2 are stored (a head moved back).
      const stamp = await store.audit.commit(EMPTY_GUARD, entriesFrom(1, 2), headAt(1));
      assert(stamp !== null);
      assertEquals(await store.audit.readHeadAndNext(1), { head: headAt(1), nextExists: true });
      const error = await assertRejects(
        () => store.audit.readChainState(1),
        GatewayError,
        "entry 2 is stored after the head (seq 1)",
      );
      assertEquals((error as GatewayError).code, "STORE_CORRUPT");
      // A commit whose first new seq is taken writes nothing, even on the right head.
      const record = await store.audit.readRecord(1);
      assertEquals(
        await store.audit.commit(
          { headVersionstamp: stamp, tailSeq: 1, tailVersionstamps: record!.versionstamps },
          entriesFrom(2, 3, 7),
          headAt(3),
        ),
        null,
      );
      assertEquals(await store.audit.readHead(), { head: headAt(1), versionstamp: stamp });
      assertEquals(await store.audit.readRecord(3), null);
      assertEquals((await store.audit.readRecord(2))?.bytes, entriesFrom(2, 2)[0].bytes);
    },
  },
  {
    name: "audit: commit() refuses an empty batch and an entry over limits.maxEntryBytes",
    async run({ store }) {
      const { limits } = store.audit;
      assertEquals(limits.maxEntryBytes, 540_000, "both adapters keep the same entries");
      assert(limits.commitMaxMutations >= 1000 && limits.commitMaxBytes >= 700_000);
      for (const size of [0, 1, 60_000, 540_000]) {
        const cost = store.audit.entryCost(size);
        assert(cost.mutations >= 1 && cost.bytes >= size, `entryCost(${size})`);
      }
      const empty = await assertRejects(
        () => store.audit.commit(EMPTY_GUARD, [], headAt(1)),
        GatewayError,
        "Cannot commit an empty audit batch",
      );
      assertEquals((empty as GatewayError).code, "INTERNAL");
      const big = { seq: 1, bytes: new Uint8Array(limits.maxEntryBytes + 1) };
      const over = await assertRejects(
        () => store.audit.commit(EMPTY_GUARD, [big], headAt(1)),
        GatewayError,
        "Cannot store audit entry 1",
      );
      assertEquals((over as GatewayError).code, "INTERNAL");
      // The largest entry fits, byte for byte.
      const largest = randomBytes(limits.maxEntryBytes);
      assert(await store.audit.commit(EMPTY_GUARD, [{ seq: 1, bytes: largest }], headAt(1)));
      assertEquals((await store.audit.readRecord(1))?.bytes, largest);
    },
  },
  {
    name: "audit: pages() streams entries in seq order, bounded by after and before",
    async run({ store, another }) {
      // 130 entries in four commits; a few large ones span several stored values.
      let guard = EMPTY_GUARD;
      for (const [first, last] of [[1, 40], [41, 80], [81, 120], [121, 130]]) {
        const entries = entriesFrom(first, last);
        for (const entry of entries) {
          if (entry.seq % 37 === 0) entry.bytes = encoder.encode("y".repeat(150_000));
        }
        assert(await store.audit.commit(guard, entries, headAt(last)));
        guard = await guardOf(store, last);
      }
      const other = await another();
      const whole = await allRecords(other, { pageSize: 16 });
      assertEquals(seqsOf(whole.records), range(1, 130));
      assert(whole.pages > 1, "small pages are read one after the other");
      assertEquals(whole.records[36].bytes?.length, 150_000);
      assertEquals(whole.records[9].bytes, entriesFrom(10, 10)[0].bytes);
      let pageCount = 0;
      for await (const page of other.audit.pages({ pageSize: 16 })) {
        assert(page.length <= 16, `a page holds at most pageSize entries, got ${page.length}`);
        pageCount++;
      }
      assertEquals(pageCount, whole.pages);

      assertEquals(seqsOf((await allRecords(other)).records), range(1, 130));
      const cases: [Parameters<Store["audit"]["pages"]>[0], number[]][] = [
        [{ after: 10, before: 50, pageSize: 16 }, range(11, 49)],
        [{ after: 36, before: 38 }, [37]],
        [{ after: 125 }, range(126, 130)],
        [{ before: 20, pageSize: 16 }, range(1, 19)],
        [{ after: 130 }, []],
        [{ before: 1 }, []],
        [{ after: 50, before: 51 }, []],
        [{ after: 200 }, []],
      ];
      for (const [options, expected] of cases) {
        assertEquals(
          seqsOf((await allRecords(other, options)).records),
          expected,
          JSON.stringify(options),
        );
      }
      for (const pageSize of [15, 0, 16.5]) {
        const error = await assertRejects(
          () => allRecords(other, { pageSize }),
          GatewayError,
          `Invalid pageSize ${pageSize}`,
        );
        assertEquals((error as GatewayError).code, "INTERNAL");
      }
    },
  },
  {
    name: "audit: two handles racing appends land every entry on one contiguous chain",
    async run({ store, another }) {
      const other = await another();
      const perWriter = 20;
      await Promise.all([
        appendLinked(store, "a1", perWriter),
        appendLinked(store, "a2", perWriter),
        appendLinked(other, "b1", perWriter),
        appendLinked(other, "b2", perWriter),
      ]);
      const total = 4 * perWriter;
      const { head } = await store.audit.readHead();
      assertEquals(head?.seq, total);
      const { records } = await allRecords(other, { pageSize: 16 });
      assertEquals(seqsOf(records), range(1, total), "contiguous seqs, none reused");
      const counts: Record<string, number> = {};
      let prev: string | null = null;
      for (const record of records) {
        const entry = JSON.parse(new TextDecoder().decode(record.bytes!));
        assertEquals(entry.seq, record.seq);
        assertEquals(entry.prev, prev, `entry ${record.seq} links to the one before: no fork`);
        prev = await sha256Hex(record.bytes!);
        counts[entry.writer] = (counts[entry.writer] ?? 0) + 1;
      }
      assertEquals(head?.hash, prev);
      assertEquals(counts, { a1: perWriter, a2: perWriter, b1: perWriter, b2: perWriter });
    },
  },
  {
    name: "audit: two audit logs on two handles append concurrently and the chain verifies",
    async run({ store, another }) {
      const other = await another();
      const logs = [createAuditLog({ store }), createAuditLog({ store: other })];
      try {
        const appends = [];
        for (let i = 0; i < 60; i++) {
          appends.push(logs[i % 2].append({
            kind: "tool.call",
            tool: "echo",
            input: { i },
            outcome: { ok: true, latency_ms: 1 },
          }));
        }
        const entries = await Promise.all(appends);
        assertEquals(entries.map((e) => e.seq).sort((a, b) => a - b), range(1, 60));
        const result = await logs[0].verify();
        assertEquals(result.ok, true, JSON.stringify(result));
        assertEquals((await logs[1].head()).head_seq, 60);
      } finally {
        for (const log of logs) await log.close();
      }
    },
  },
  {
    name: "audit: outbox deliveries ride in the commit of their entries, stamped with it",
    async run({ store, another }) {
      const other = await another();
      const event = (id: string) => ({
        id,
        type: "tool.called",
        timestamp: TIMESTAMP,
        body: encoder.encode(JSON.stringify({ id, pad: "z".repeat(100) })),
      });
      const fanout = {
        event_type: "tool.called",
        created_at: TIMESTAMP,
        next_attempt_at: 1_000,
        webhook_ids: ["wh_a", "wh_b"],
      };
      const outbox = (id: string) => ({
        ops: [
          { op: "put_event" as const, event: event(id) },
          { op: "put_fanout" as const, event_id: id, fanout },
        ],
        bumpVersion: true,
      });
      const before = await other.deliveries.version();
      const stamp = await store.audit.commit(
        EMPTY_GUARD,
        entriesFrom(1, 1),
        headAt(1),
        outbox("evt_one"),
      );
      assert(stamp !== null);
      const stored = await other.deliveries.readEvent("evt_one");
      assertEquals(stored, { event: event("evt_one"), versionstamp: stamp });
      const pending = await other.deliveries.listPending();
      assertEquals(
        pending.map(({ record }) => [record.event_id, record.webhook_id]),
        [["evt_one", "wh_a"], ["evt_one", "wh_b"]],
      );
      const afterOne = await other.deliveries.version();
      assert(afterOne > before, "bumpVersion bumps the deliveries version");

      // A commit that loses the race writes none of its deliveries.
      assertEquals(
        await store.audit.commit(EMPTY_GUARD, entriesFrom(1, 1), headAt(1), outbox("evt_two")),
        null,
      );
      assertEquals(await other.deliveries.readEvent("evt_two"), null);
      assertEquals((await other.deliveries.listPending()).length, 2);
      assertEquals(await other.deliveries.version(), afterOne);
    },
  },
  {
    name: "audit: a staged incoming job rides in the commit of its entry",
    async run({ store, another }) {
      const body = randomBytes(store.incoming.stagedBodyMaxBytes);
      const staged = store.incoming.stage(
        { id: "inj_rides", endpoint_id: "in_1", handler: "echo", received_at: TIMESTAMP },
        body,
      );
      assert(staged, "a body of stagedBodyMaxBytes is staged");
      assertEquals(staged.job.body_bytes, body.byteLength);
      assert(staged.writes.cost.mutations >= 1 && staged.writes.cost.bytes >= body.byteLength);
      assertEquals(await store.incoming.list(), [], "staging writes nothing");
      const small = store.incoming.stage(
        { id: "inj_rides2", endpoint_id: "in_1", handler: "echo", received_at: TIMESTAMP },
        encoder.encode("{}"),
      );
      assert(small);
      assert(
        await store.audit.commit(
          EMPTY_GUARD,
          entriesFrom(1, 2),
          headAt(2),
          undefined,
          [staged.writes, small.writes],
        ),
      );
      const other = await another();
      assertEquals(await other.incoming.list(), [staged.job, small.job]);
      assertEquals(await other.incoming.readBody(staged.job), body);
      assertEquals(await other.incoming.readBody(small.job), encoder.encode("{}"));
    },
  },
  {
    name:
      "audit: pages() with skip returns every entry a reader wants (those without the prefix, those holding every needle), in order",
    async run({ store, adapter }) {
      const texts: string[] = [];
      for (let seq = 1; seq <= 60; seq++) {
        const tool = seq % 10 === 0 ? "rare" : seq % 2 ? "echo" : "memory_get";
        const name = seq % 20 === 0 ? 'qu"ote é' : "ci";
        // Every seventh entry is laid out another way: it must always come back.
        texts.push(
          seq % 7 === 0
            ? JSON.stringify({ seq, tool, name }, null, 1)
            : `{"entry_hash":"x","name":${JSON.stringify(name)},"seq":${seq},"tool":"${tool}"}`,
        );
      }
      const entries = texts.map((text, i) => ({ seq: i + 1, bytes: encoder.encode(text) }));
      assert(await store.audit.commit(EMPTY_GUARD, entries, headAt(60)));
      const prefix = '{"entry_hash":"';
      const needles = ['"tool":"rare"', JSON.stringify('qu"ote é')];
      const wanted = range(1, 60).filter((seq) =>
        seq % 7 === 0 || needles.every((needle) => texts[seq - 1].includes(needle))
      );
      assertEquals(wanted, [7, 14, 20, 21, 28, 35, 40, 42, 49, 56, 60]);
      for (const options of [{}, { pageSize: 16 }, { after: 20, before: 57, pageSize: 16 }]) {
        const { records } = await allRecords(store, { ...options, skip: { prefix, needles } });
        const seqs = seqsOf(records);
        const after = (options as { after?: number }).after ?? 0;
        const before = (options as { before?: number }).before ?? 61;
        const expected = wanted.filter((seq) => seq > after && seq < before);
        for (const seq of expected) assert(seqs.includes(seq), `${seq} was left out`);
        assertEquals(seqs, [...seqs].sort((a, b) => a - b));
        for (const record of records) assertEquals(record.bytes, entries[record.seq - 1].bytes);
        // PostgreSQL leaves the others in the database; Deno KV may return them.
        if (adapter === "postgres") assertEquals(seqs, expected);
      }
    },
  },
  {
    name:
      "audit: the log's filtered list() reads at most maxScan entries a call and finds every match on the way",
    async run({ store }) {
      const log = createAuditLog({ store });
      const outcome = { ok: true, latency_ms: 1 };
      await Promise.all(Array.from({ length: 120 }, (_, i) =>
        log.append({
          kind: i % 3 ? "tool.call" : "prompt.get",
          tool: i % 25 === 4 ? "rare" : "echo",
          caller: i % 2 ? { kind: "key", name: "ci", id: "key_01" } : { kind: "admin" },
          input: { i },
          outcome,
        })));
      await log.close();
      const collect = async (filter: Record<string, string>, maxScan: number) => {
        const seqs: number[] = [];
        const stops: (number | null)[] = [];
        let after = 0;
        for (let calls = 0; calls < 50; calls++) {
          const page = await log.list({ ...filter, limit: 3, maxScan, after });
          seqs.push(...page.entries.map((e) => e.seq));
          stops.push(page.next_after);
          if (page.next_after === null) break;
          after = page.next_after;
        }
        return { seqs, stops };
      };
      const rare = await collect({ tool: "rare" }, 40);
      assertEquals(rare.seqs, [5, 30, 55, 80, 105]);
      assertEquals(rare.stops, [40, 80, null]);
      const ci = await collect({ caller: "key_01", kind: "prompt.get" }, 1000);
      assertEquals(ci.seqs, range(1, 120).filter((seq) => seq % 2 === 0 && (seq - 1) % 3 === 0));
      assertEquals((await log.list({ tool: "none", maxScan: 50 })).next_after, 50);
      assertEquals((await log.list({ tool: "none", maxScan: 500 })).next_after, null);
    },
  },
  {
    name:
      "audit: tiles ride in the entries' commit, read back in order, and a lost race writes none",
    async run({ store, another: open }) {
      const another = await open();
      const tile = (n: number, fill: number) => new Uint8Array(32 * n).fill(fill);
      const stamp = await store.audit.commit(
        EMPTY_GUARD,
        entriesFrom(1, 2),
        { ...headAt(2), tree: 2 },
        undefined,
        [],
        [{ level: 0, index: 0, hashes: tile(2, 1) }],
      );
      assert(stamp !== null);
      assertEquals((await another.audit.readHead()).head, { ...headAt(2), tree: 2 });
      // A stale guard: neither the entry nor the tile lands.
      assertEquals(
        await store.audit.commit(
          EMPTY_GUARD,
          entriesFrom(3, 3),
          { ...headAt(3), tree: 3 },
          undefined,
          [],
          [
            { level: 0, index: 0, hashes: tile(3, 9) },
          ],
        ),
        null,
      );
      // Tiles alone (a tree being built for entries already stored): no entry is needed.
      const guard = await guardOf(store);
      const built = await store.audit.commit(guard, [], { ...headAt(2), tree: 2 }, undefined, [], [
        { level: 0, index: 0, hashes: tile(2, 2) },
        { level: 0, index: 7, hashes: tile(32, 3) },
      ]);
      assert(built !== null);
      const tiles = await another.audit.readTiles([
        { level: 0, index: 7 },
        { level: 1, index: 0 },
        { level: 0, index: 0 },
        ...Array.from({ length: 12 }, (_, index) => ({ level: 2, index })),
      ]);
      assertEquals(tiles.length, 15);
      assertEquals(tiles[0], tile(32, 3));
      assertEquals(tiles[1], null);
      assertEquals(tiles[2], tile(2, 2));
      assertEquals(await store.audit.readTiles([]), []);
      assertEquals(await store.audit.readRecord(3), null);
    },
  },
  {
    name:
      "audit: keepTiles stores tiles unless a copy as long is there; a prune moves its mark only forward",
    async run({ store, another: open }) {
      const another = await open();
      const tile = (n: number, fill: number) => new Uint8Array(32 * n).fill(fill);
      assert(
        await store.audit.commit(EMPTY_GUARD, entriesFrom(1, 40), { ...headAt(40), tree: 40 }) !==
          null,
      );
      await store.audit.keepTiles([
        { level: 0, index: 0, hashes: tile(32, 1) },
        { level: 0, index: 1, hashes: tile(3, 1) },
      ]);
      // A shorter or equal copy (a slower pruner) leaves what is there; a longer one replaces it.
      await another.audit.keepTiles([
        { level: 0, index: 0, hashes: tile(32, 2) },
        { level: 0, index: 1, hashes: tile(2, 2) },
        { level: 0, index: 2, hashes: tile(1, 2) },
      ]);
      assertEquals(await store.audit.readTiles([{ level: 0, index: 0 }, { level: 0, index: 1 }]), [
        tile(32, 1),
        tile(3, 1),
      ]);
      await store.audit.keepTiles([{ level: 0, index: 1, hashes: tile(6, 3) }]);
      assertEquals(
        await another.audit.readTiles([{ level: 0, index: 1 }, { level: 0, index: 2 }]),
        [
          tile(6, 3),
          tile(1, 2),
        ],
      );
      await store.audit.keepTiles(
        Array.from({ length: 250 }, (_, index) => ({ level: 1, index, hashes: tile(1, 4) })),
      );
      assertEquals((await another.audit.readTiles([{ level: 1, index: 249 }]))[0], tile(1, 4));

      const mark = (through: number) => ({
        through,
        hash: `sha256:${"0".repeat(64)}`,
        at: "2026-12-04T00:00:00.000Z",
      });
      assertEquals(await store.audit.prune(mark(35)), 35);
      assertEquals(await another.audit.readRecord(35), null);
      assert((await another.audit.readRecord(36)) !== null);
      await another.audit.prune(mark(34));
      assertEquals((await store.audit.readPruned())?.through, 35);
      assertEquals(await store.audit.prune(mark(38)), 3);
      assertEquals((await another.audit.readPruned())?.through, 38);
    },
  },
  {
    name:
      "audit: signing keys: the first is added once, a rotation retires the current one, a stale one loses",
    async run({ store, another: open }) {
      const another = await open();
      const key = (id: string, at: string) => ({
        id,
        name: "toolgate/test",
        public_key: "cHVi",
        sealed_seed: "c2VhbGVk",
        created_at: at,
      });
      assertEquals(await store.audit.readKeys(), []);
      assertEquals(await store.audit.addKey(key("0000000a", "2026-01-01T00:00:00Z"), null), true);
      // A second instance that also saw no key loses.
      assertEquals(
        await another.audit.addKey(key("0000000b", "2026-01-01T00:00:01Z"), null),
        false,
      );
      const retiring = { id: "0000000a", retired_at: "2026-02-01T00:00:00Z" };
      assertEquals(
        await store.audit.addKey(key("0000000c", "2026-02-01T00:00:00Z"), retiring),
        true,
      );
      assertEquals(
        await store.audit.addKey(key("0000000d", "2026-02-01T00:00:00Z"), retiring),
        false,
      );
      assertEquals(await another.audit.readKeys(), [
        key("0000000c", "2026-02-01T00:00:00Z"),
        { ...key("0000000a", "2026-01-01T00:00:00Z"), retired_at: "2026-02-01T00:00:00Z" },
      ]);
    },
  },
  {
    name: "audit: putCheckpoint() keeps the largest tree's checkpoint",
    async run({ store, another: open }) {
      const another = await open();
      assertEquals(await store.audit.readCheckpoint(), null);
      assertEquals(await store.audit.putCheckpoint({ size: 5, note: "five" }), true);
      assertEquals(await another.audit.putCheckpoint({ size: 5, note: "again" }), false);
      assertEquals(await store.audit.putCheckpoint({ size: 3, note: "three" }), false);
      assertEquals(await store.audit.putCheckpoint({ size: 9, note: "nine" }), true);
      assertEquals(await another.audit.readCheckpoint(), { size: 9, note: "nine" });
    },
  },
];
