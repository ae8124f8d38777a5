import { assert, assertEquals, assertRejects } from "../../_asserts.ts";
import { tempHome } from "../../_helpers.ts";
import { KV_GET_MANY_MAX, ReadBatcher } from "../../../src/store/kv/_reads.ts";
import {} from "../../../src/store/mod.ts";
import { openKvStore as openStore, withLockRetry } from "../../../src/store/kv/kv_store.ts";

/** A real KV file whose `getMany` calls are recorded. */
async function recordedKv(path: string) {
  const kv = await Deno.openKv(path);
  const calls: number[] = [];
  const getMany = kv.getMany.bind(kv);
  kv.getMany = ((keys: Deno.KvKey[]) => {
    calls.push(keys.length);
    return getMany(keys);
  }) as Deno.Kv["getMany"];
  return { kv, calls };
}

Deno.test("ReadBatcher: reads made while others are in flight share getMany calls of at most 10 keys", async () => {
  await using tmp = await tempHome();
  const { kv, calls } = await recordedKv(`${tmp.home}/reads.kv`);
  try {
    const write = kv.atomic();
    for (let i = 0; i < 25; i += 2) write.set(["k", i], `value ${i}`);
    await write.commit();
    const reads = new ReadBatcher(kv, withLockRetry);
    const entries = await Promise.all(
      Array.from({ length: 25 }, (_, i) => reads.get<string>(["k", i])),
    );
    entries.forEach((entry, i) => {
      assertEquals(entry.key, ["k", i]);
      assertEquals(entry.value, i % 2 === 0 ? `value ${i}` : null);
    });
    // Two go out alone (one served, one queued on the handle); the other 23
    // wait for them and go in batches.
    assertEquals(calls, [1, 1, KV_GET_MANY_MAX, KV_GET_MANY_MAX, 3]);
  } finally {
    kv.close();
  }
});

Deno.test("ReadBatcher: a lone read goes out at once, in a getMany of its own", async () => {
  await using tmp = await tempHome();
  const { kv, calls } = await recordedKv(`${tmp.home}/reads.kv`);
  try {
    await kv.set(["k"], 1);
    const reads = new ReadBatcher(kv, withLockRetry);
    for (let i = 0; i < 3; i++) assertEquals((await reads.get(["k"])).value, 1);
    assertEquals(calls, [1, 1, 1]);
  } finally {
    kv.close();
  }
});

Deno.test("ReadBatcher: a key KV refuses fails only its own read, not the batch it shared", async () => {
  await using tmp = await tempHome();
  const { kv, calls } = await recordedKv(`${tmp.home}/reads.kv`);
  try {
    await kv.set(["k", 3], "three");
    const reads = new ReadBatcher(kv, withLockRetry);
    const tooLarge = ["k", "x".repeat(4096)];
    const results = await Promise.allSettled([
      reads.get(["k", 1]),
      reads.get(["k", 2]),
      reads.get(["k", 3]), // these three queue behind the first two and share a batch
      reads.get(tooLarge),
      reads.get(["k", 4]),
    ]);
    assertEquals(results.map((result) => result.status), [
      "fulfilled",
      "fulfilled",
      "fulfilled",
      "rejected",
      "fulfilled",
    ]);
    assertEquals(
      (results[2] as PromiseFulfilledResult<Deno.KvEntryMaybe<string>>).value.value,
      "three",
    );
    const reason = (results[3] as PromiseRejectedResult).reason as Error;
    assert(/key too large/i.test(reason.message), reason.message);
    assertEquals(calls.slice(0, 3), [1, 1, 3]);
  } finally {
    kv.close();
  }
});

Deno.test("Store.get() sees a commit made on the write handle just before; concurrent reads each get their own key", async () => {
  await using tmp = await tempHome();
  const store = await openStore({ dataDir: tmp.home });
  try {
    const keys = Array.from({ length: 40 }, (_, i) => ["memory", `k${i}`]);
    for (const [index, key] of keys.entries()) {
      await store.kv.set(key, index);
      assertEquals((await store.get(key)).value, index);
    }
    const values = await Promise.all(keys.map(async (key) => (await store.get(key)).value));
    assertEquals(values, keys.map((_, index) => index));
  } finally {
    store.close();
  }
});

Deno.test("ReadBatcher: a failed getMany that is not about one key rejects every read of the batch", async () => {
  await using tmp = await tempHome();
  const kv = await Deno.openKv(`${tmp.home}/reads.kv`);
  const reads = new ReadBatcher(kv, withLockRetry);
  kv.close();
  const results = await Promise.allSettled([reads.get(["a"]), reads.get(["b"]), reads.get(["c"])]);
  assertEquals(results.map((result) => result.status), ["rejected", "rejected", "rejected"]);
  await assertRejects(() => reads.get(["d"]));
});
