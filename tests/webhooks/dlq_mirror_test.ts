import { assert, assertEquals } from "../_asserts.ts";
import type { Store } from "../../src/store/mod.ts";
import {
  appendDlqMirror,
  cleanDlqMirrorTemps,
  type DlqEntry,
  dlqEntry,
  listDlq,
  repairDlqMirror,
  writeDlqMirror,
} from "../../src/webhooks/dlq.ts";
import {
  appendOffset,
  isMirrorTempName,
  mirrorTempName,
  rebuildMirror,
} from "../../src/webhooks/_dlq_mirror.ts";
import { setup } from "./_setup.ts";

const encoder = new TextEncoder();

/**
 * Writes dead-letter records `from`..`from + count - 1` straight to the store
 * (as the dispatcher does), failed a second apart, and returns their entries.
 */
async function putDlq(store: Store, from: number, count = 1): Promise<DlqEntry[]> {
  const writer = store.deliveries.writer();
  const entries: DlqEntry[] = [];
  const writes: Promise<unknown>[] = [];
  for (let i = from; i < from + count; i++) {
    const failedAt = new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString();
    const n = String(i).padStart(6, "0");
    const event = {
      id: `evt_${n.padStart(32, "0")}`,
      type: "tool.called",
      timestamp: failedAt,
      data: { tool_name: `t${i}`, note: "brackets ] [ and a\nnewline" },
    };
    const body = encoder.encode(JSON.stringify(event));
    const record = {
      dlq_id: `dlq_${n.padStart(26, "0")}`,
      webhook_id: "wh_test",
      url: "https://receiver.example/hook",
      event_id: event.id,
      event_type: event.type,
      attempts: [
        { attempt: 1, at: failedAt, status: 500, duration_ms: 3 },
        { attempt: 2, at: failedAt, error: "timeout [10 s]", duration_ms: 10 },
      ],
      failed_at: failedAt,
    };
    writes.push(writer.write([{ op: "put_dlq", record, body }]));
    entries.push(dlqEntry(record, body));
  }
  await Promise.all(writes);
  return entries;
}

/** What `dlq.json` holds for `entries`: the format of `JSON.stringify(entries, null, 2)`. */
function fileText(entries: readonly DlqEntry[]): string {
  return JSON.stringify(entries, null, 2) + "\n";
}

async function tempsIn(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (isMirrorTempName(entry.name)) names.push(entry.name);
  }
  return names;
}

Deno.test("appendDlqMirror() adds entries in place: same inode, only their bytes, valid JSON, 0600", async () => {
  await using env = await setup();
  const path = `${env.dir}/dlq.json`;
  const expected = await putDlq(env.store, 0, 3);
  await writeDlqMirror(env.store);
  const { ino } = await Deno.stat(path);
  for (const [from, count] of [[3, 1], [4, 1], [5, 2]]) {
    const before = await Deno.readTextFile(path);
    const entries = await putDlq(env.store, from, count);
    expected.push(...entries);
    assertEquals(await appendDlqMirror(env.store, entries), "appended");
    const after = await Deno.readTextFile(path);
    assertEquals(after, fileText(expected));
    assert(after.startsWith(before.slice(0, -"\n]\n".length)), "the bytes before were kept");
    assertEquals(JSON.parse(after), expected);
    const stat = await Deno.stat(path);
    assertEquals(stat.ino, ino);
    assertEquals(stat.mode! & 0o777, 0o600);
  }
  assertEquals(await tempsIn(env.dir), []);
});

Deno.test("appendDlqMirror() never rewrites what is before the end: a marker in the first entry survives 100 appends", async () => {
  await using env = await setup();
  const path = `${env.dir}/dlq.json`;
  await putDlq(env.store, 0, 300);
  await writeDlqMirror(env.store);
  // Plant a marker in place that any rewrite from the store would undo, keeping
  // size and mtime, so the file still looks as this process left it.
  const { ino, mtime, atime } = await Deno.stat(path);
  const text = await Deno.readTextFile(path);
  const at = encoder.encode(text.slice(0, text.indexOf('"wh_test"'))).length;
  using file = await Deno.open(path, { write: true });
  await file.seek(at, Deno.SeekMode.Start);
  await file.write(encoder.encode('"wh_MARK"'));
  await Deno.utime(path, atime!, mtime!);
  const entries = await putDlq(env.store, 300, 100);
  for (const entry of entries) assertEquals(await appendDlqMirror(env.store, [entry]), "appended");
  const stored = await listDlq(env.store);
  stored[0].webhook_id = "wh_MARK";
  assertEquals(await Deno.readTextFile(path), fileText(stored));
  assertEquals((await Deno.stat(path)).ino, ino);
});

Deno.test("appendDlqMirror() fills an empty array in place, and rebuilds a missing file", async () => {
  await using env = await setup();
  const path = `${env.dir}/dlq.json`;
  await writeDlqMirror(env.store);
  assertEquals(await Deno.readTextFile(path), "[]\n");
  const first = await putDlq(env.store, 0);
  assertEquals(await appendDlqMirror(env.store, first), "appended");
  assertEquals(await Deno.readTextFile(path), fileText(first));
  await Deno.remove(path);
  const second = await putDlq(env.store, 1);
  assertEquals(await appendDlqMirror(env.store, second), "rebuilt");
  assertEquals(await Deno.readTextFile(path), fileText([...first, ...second]));
  assertEquals((await Deno.stat(path)).mode! & 0o777, 0o600);
});

Deno.test("appendDlqMirror() rebuilds when the file holds the id already or another process replaced it", async () => {
  await using env = await setup();
  const path = `${env.dir}/dlq.json`;
  const [first] = await putDlq(env.store, 0);
  await writeDlqMirror(env.store);
  // A record failing again after a replay: same id, new attempts.
  const again = { ...first, attempts: [...first.attempts, { ...first.attempts[0], attempt: 3 }] };
  const { event, ...record } = again;
  await env.store.deliveries.writer().write([{
    op: "put_dlq",
    record: { ...record, event_id: event.id, event_type: event.type },
    body: encoder.encode(JSON.stringify(event)),
  }]);
  assertEquals(await appendDlqMirror(env.store, [again]), "rebuilt");
  assertEquals(await Deno.readTextFile(path), fileText([again]));
  // Another process (dlq purge) renames its own rebuild into place.
  const second = await putDlq(env.store, 1);
  await Deno.writeTextFile(`${path}.new`, fileText([again]), { mode: 0o600 });
  await Deno.rename(`${path}.new`, path);
  assertEquals(await appendDlqMirror(env.store, second), "rebuilt");
  assertEquals(await Deno.readTextFile(path), fileText([again, ...second]));
});

Deno.test("appendOffset() rejects every torn prefix of an append, and accepts the whole one", () => {
  const entry = (i: number) => ({ dlq_id: `dlq_${i}`, attempts: [{ error: "x ] y" }], data: {} });
  const before = encoder.encode(JSON.stringify([entry(0)], null, 2) + "\n");
  const after = encoder.encode(JSON.stringify([entry(0), entry(1)], null, 2) + "\n");
  const at = appendOffset(before, 0);
  assertEquals(at, { offset: before.length - 3, empty: false });
  const written = after.subarray(at!.offset);
  for (let k = 1; k < written.length - 1; k++) {
    // The first k bytes of the append landed; the old bytes beyond them remain.
    const torn = new Uint8Array(Math.max(before.length, at!.offset + k));
    torn.set(before);
    torn.set(written.subarray(0, k), at!.offset);
    assertEquals(appendOffset(torn, 0), null, `prefix of ${k} bytes`);
  }
  assertEquals(appendOffset(after.subarray(0, after.length - 1), 0)?.empty, false);
  assertEquals(appendOffset(after, 0), { offset: after.length - 3, empty: false });
  assertEquals(appendOffset(encoder.encode("[]"), 0), { offset: 1, empty: true });
  assertEquals(appendOffset(encoder.encode("  [ \n ]\n"), 0), { offset: 3, empty: true });
  assertEquals(appendOffset(encoder.encode(""), 0), null);
  assertEquals(appendOffset(encoder.encode("[{}]"), 0), null);
  assertEquals(appendOffset(encoder.encode("x[]"), 0), null);
  assertEquals(appendOffset(encoder.encode("[]"), 10), null, "a [ that may not start the file");
});

Deno.test("a torn append is repaired from the store: by repairDlqMirror() and by the next append", async () => {
  await using env = await setup();
  const path = `${env.dir}/dlq.json`;
  const entries = await putDlq(env.store, 0, 3);
  await writeDlqMirror(env.store);
  const whole = await Deno.readTextFile(path);
  assertEquals(await repairDlqMirror(env.store), false);
  // Killed mid-append: cut inside the last entry, just after its attempts' `]`.
  const cut = whole.lastIndexOf("]", whole.length - 4) + 1;
  await Deno.truncate(path, cut);
  assertEquals(await repairDlqMirror(env.store), true);
  assertEquals(await Deno.readTextFile(path), fileText(entries));
  assertEquals((await Deno.stat(path)).mode! & 0o777, 0o600);
  const { ino } = await Deno.stat(path);
  assertEquals(await repairDlqMirror(env.store), false);
  assertEquals((await Deno.stat(path)).ino, ino, "a complete file is left alone");

  await Deno.truncate(path, whole.length - 40);
  const more = await putDlq(env.store, 3);
  assertEquals(await appendDlqMirror(env.store, more), "rebuilt");
  assertEquals(await Deno.readTextFile(path), fileText([...entries, ...more]));

  await Deno.remove(path);
  assertEquals(await repairDlqMirror(env.store), false);
  await assertMissing(path);
});

async function assertMissing(path: string): Promise<void> {
  const found = await Deno.stat(path).then(() => true, () => false);
  assertEquals(found, false, `${path} exists`);
}

Deno.test("a torn mirror left by another process is rebuilt by this process's first append", async () => {
  await using env = await setup();
  const path = `${env.dir}/dlq.json`;
  const entries = await putDlq(env.store, 0, 2);
  await Deno.writeTextFile(path, fileText(entries.slice(0, 1)).slice(0, -1) + ',\n  {\n    "dl');
  const more = await putDlq(env.store, 2);
  assertEquals(await appendDlqMirror(env.store, more), "rebuilt");
  assertEquals(await Deno.readTextFile(path), fileText([...entries, ...more]));
  assertEquals(await appendDlqMirror(env.store, await putDlq(env.store, 3)), "appended");
});

Deno.test("cleanDlqMirrorTemps() removes the mirror's temp files and nothing else", async () => {
  const dir = await Deno.makeTempDir({ prefix: "toolgate-dlq-" });
  try {
    const temps = [mirrorTempName(), mirrorTempName()].sort();
    const uuid = crypto.randomUUID();
    const others = [
      "dlq.json",
      ".dlq.json.tmp",
      `.dlq.json.${uuid}.tmp.bak`,
      `x.dlq.json.${uuid}.tmp`,
      `.config.json.${uuid}.tmp`,
      `.dlq.json.${uuid.toUpperCase()}.tmp`,
      `.dlq.json.${uuid.slice(1)}.tmp`,
    ];
    for (const name of [...temps, ...others]) await Deno.writeTextFile(`${dir}/${name}`, "[");
    await Deno.mkdir(`${dir}/${mirrorTempName()}`);
    assertEquals(await cleanDlqMirrorTemps(dir), temps);
    const left: string[] = [];
    for await (const entry of Deno.readDir(dir)) left.push(entry.name);
    assertEquals(
      left.filter((name) => !isMirrorTempName(name)).sort(),
      [...others, ".dlq.json.lock"].sort(),
    );
    assertEquals(left.filter(isMirrorTempName).length, 1, "the directory is left alone");
    assertEquals(await cleanDlqMirrorTemps(dir), []);
    assertEquals((await Deno.stat(`${dir}/.dlq.json.lock`)).mode! & 0o777, 0o600);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the first mirror write of a process removes leftover temp files", async () => {
  await using env = await setup();
  const stray = `${env.dir}/${mirrorTempName()}`;
  await Deno.writeTextFile(stray, "[\n  {");
  const entries = await putDlq(env.store, 0);
  assertEquals(await appendDlqMirror(env.store, entries), "rebuilt");
  await assertMissing(stray);
  assertEquals(await tempsIn(env.dir), []);
});

Deno.test("a rebuild streams: each page is on disk before the next is read, and a failure keeps the old file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "toolgate-dlq-" });
  try {
    const entry = (i: number) => ({ dlq_id: `dlq_${i}`, n: i });
    const onDisk: number[] = [];
    await rebuildMirror(dir, async function* () {
      for (let page = 0; page < 3; page++) {
        if (page > 0) {
          const [temp] = await tempsIn(dir);
          onDisk.push((await Deno.readTextFile(`${dir}/${temp}`)).split('"dlq_id"').length - 1);
        }
        yield [entry(2 * page), entry(2 * page + 1)];
      }
    });
    assertEquals(onDisk, [2, 4]);
    const all = [0, 1, 2, 3, 4, 5].map(entry);
    assertEquals(await Deno.readTextFile(`${dir}/dlq.json`), JSON.stringify(all, null, 2) + "\n");
    assertEquals((await Deno.stat(`${dir}/dlq.json`)).mode! & 0o777, 0o600);

    const failing = rebuildMirror(dir, async function* () {
      yield [entry(9)];
      throw new Error("store unreachable");
    });
    const error = await failing.then(() => null, (e: Error) => e);
    assertEquals(error?.message, "store unreachable");
    assertEquals(await Deno.readTextFile(`${dir}/dlq.json`), JSON.stringify(all, null, 2) + "\n");
    assertEquals(await tempsIn(dir), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeDlqMirror() matches the store byte for byte across pages", async () => {
  await using env = await setup();
  await putDlq(env.store, 0, 600);
  await writeDlqMirror(env.store);
  const entries = await listDlq(env.store);
  assertEquals(entries.length, 600);
  assertEquals(await Deno.readTextFile(`${env.dir}/dlq.json`), fileText(entries));
  assertEquals((await Deno.stat(`${env.dir}/dlq.json`)).mode! & 0o777, 0o600);
  assertEquals(await tempsIn(env.dir), []);
});

Deno.test("mirror writes of one process are serialized: no entry lost or doubled", async () => {
  await using env = await setup();
  await putDlq(env.store, 0, 5);
  await writeDlqMirror(env.store);
  const writes: Promise<unknown>[] = [];
  for (let i = 5; i < 25; i++) {
    const entries = await putDlq(env.store, i);
    writes.push(appendDlqMirror(env.store, entries));
    // A rebuild queued ahead of later appends lists records they append too.
    if (i % 7 === 0) writes.push(writeDlqMirror(env.store));
  }
  await Promise.all(writes);
  const ids = (JSON.parse(await Deno.readTextFile(`${env.dir}/dlq.json`)) as DlqEntry[])
    .map((e) => e.dlq_id);
  assertEquals(ids, (await listDlq(env.store)).map((e) => e.dlq_id));
});

Deno.test("a mirror write waits for another process's lock and then lists the store", async () => {
  await using env = await setup();
  await writeDlqMirror(env.store);
  const other = await Deno.open(`${env.dir}/.dlq.json.lock`, { write: true });
  await other.lock(true);
  let done = false;
  const write = writeDlqMirror(env.store).then(() => done = true);
  const entries = await putDlq(env.store, 0, 3);
  assertEquals(done, false);
  assertEquals(await Deno.readTextFile(`${env.dir}/dlq.json`), "[]\n");
  other.close();
  await write;
  assertEquals(await Deno.readTextFile(`${env.dir}/dlq.json`), fileText(entries));
});
