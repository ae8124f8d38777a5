import { assert, assertEquals } from "../_asserts.ts";
import { type AuditEntry, createAuditLog } from "../../src/audit/mod.ts";
import { openStore } from "../../src/store/mod.ts";
import { tempStore, toolCall } from "./_store.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const WORKER = new URL("./fixtures/append_worker.ts", import.meta.url).pathname;

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

async function allEntries(log: ReturnType<typeof createAuditLog>): Promise<AuditEntry[]> {
  const out: AuditEntry[] = [];
  for await (const entry of log.entries()) out.push(entry);
  return out;
}

Deno.test("500 concurrent appends get seqs 1 to 500 without gaps and the chain verifies", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  const entries = await Promise.all(
    Array.from({ length: 500 }, (_, i) => log.append(toolCall(`t${i % 7}`, { i }))),
  );
  assertEquals(entries.map((e) => e.seq), range(1, 500), "seqs follow the order of the calls");
  assertEquals(await log.verify(), {
    ok: true,
    count: 500,
    head_seq: 500,
    head_hash: entries[499].entry_hash,
  });
  await log.close();
});

Deno.test("appends arriving while a commit runs are group-committed and stay in order", async () => {
  await using tmp = await tempStore();
  const log = createAuditLog({ store: tmp.store });
  const seqs: number[] = [];
  await Promise.all(Array.from({ length: 16 }, async (_, worker) => {
    for (let i = 0; i < 40; i++) {
      seqs.push((await log.append(toolCall(`w${worker}`, { i }))).seq);
    }
  }));
  assertEquals(seqs.toSorted((a, b) => a - b), range(1, 640));
  assertEquals((await log.verify()).ok, true);
  await log.close();
});

Deno.test("two logs on separate KV handles of one file never fork the chain", async () => {
  await using tmp = await tempStore();
  const other = await openStore({ dataDir: tmp.dataDir });
  try {
    const a = createAuditLog({ store: tmp.store });
    const b = createAuditLog({ store: other });
    const results = await Promise.all(
      Array.from(
        { length: 300 },
        (_, i) => (i % 2 ? a : b).append(toolCall(i % 2 ? "a" : "b", { i })),
      ),
    );
    await Promise.all([a.close(), b.close()]);
    assertEquals(results.map((e) => e.seq).toSorted((x, y) => x - y), range(1, 300));
    const entries = await allEntries(a);
    assertEquals(entries.map((e) => e.seq), range(1, 300));
    for (const [index, entry] of results.entries()) {
      assertEquals(entries[entry.seq - 1], entry, `entry ${index} is stored as returned`);
    }
    assertEquals((await a.verify()).ok, true);
  } finally {
    other.close();
  }
});

Deno.test("two processes appending to one data dir keep the chain contiguous and intact", async () => {
  await using tmp = await tempStore();
  const perProcess = 500;
  const run = (name: string) =>
    new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--cached-only",
        "--config",
        `${ROOT}deno.json`,
        WORKER,
        tmp.dataDir,
        String(perProcess),
        name,
        "8",
        "p1,p2",
      ],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
  const outputs = await Promise.all([run("p1"), run("p2")]);
  const reports: { name: string; seqs: number[] }[] = [];
  for (const output of outputs) {
    assertEquals(output.code, 0, new TextDecoder().decode(output.stderr));
    reports.push(JSON.parse(new TextDecoder().decode(output.stdout)));
  }
  const all = reports.flatMap((r) => r.seqs).toSorted((a, b) => a - b);
  assertEquals(all, range(1, 2 * perProcess), "no seq skipped or reused");
  const log = createAuditLog({ store: tmp.store });
  const entries = await allEntries(log);
  assertEquals(entries.map((e) => e.seq), range(1, 2 * perProcess));
  for (const report of reports) {
    const mine = entries.filter((e) => e.tool === report.name);
    assertEquals(mine.map((e) => e.seq), report.seqs.toSorted((a, b) => a - b));
    assertEquals(
      mine.map((e) => (e.input as { i: number }).i).toSorted((a, b) => a - b),
      range(0, perProcess - 1),
    );
  }
  assert(
    entries.some((e, i) => i > 0 && e.tool !== entries[i - 1].tool),
    "the two writers interleaved",
  );
  assertEquals(await log.verify(), {
    ok: true,
    count: 2 * perProcess,
    head_seq: 2 * perProcess,
    head_hash: entries[entries.length - 1].entry_hash,
  });
  await log.close();
});
