/**
 * Contract: the delivery lease. One owner holds it at a time, whatever the
 * number of handles claiming; it is taken when free, lapsed, already the
 * claimer's, or held by a process of this host that no longer runs, and
 * given up only by its holder.
 *
 * @module
 */
import { assert, assertEquals } from "../../_asserts.ts";
import type { Store } from "../../../src/store/mod.ts";
import type { ContractCase, ContractEnv } from "./_contract.ts";

const ROOT = new URL("../../../", import.meta.url);
const OPEN_STORE = new URL("src/store/mod.ts", ROOT).href;

/**
 * Starts another process that opens the same store and claims the lease as
 * `owner`; it runs until its stdin is closed, and then exits without giving
 * the lease up (as a killed process would).
 */
async function holderProcess(env: ContractEnv, owner: string) {
  const { store, adapter } = env;
  const options = {
    dataDir: store.dataDir,
    ...(adapter === "postgres" ? { url: store.location, pool: { max: 1 } } : {}),
  };
  const code = `
    import { openStore } from ${JSON.stringify(OPEN_STORE)};
    const store = await openStore(${JSON.stringify(options)});
    const held = await store.leases.claimDelivery({ owner: ${
    JSON.stringify(owner)
  }, ttlMs: 3_600_000 });
    console.log(held ? "held" : "refused");
    for await (const _ of Deno.stdin.readable) { /* until closed */ }
    await store.close();
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--cached-only", "--config", new URL("deno.json", ROOT).pathname, code],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const first = await reader.read();
  return {
    said: first.value?.trim(),
    /** Lets the process end; resolves once it has exited, with its stderr. */
    async exit(): Promise<string> {
      await child.stdin.close();
      const [status, stderr] = await Promise.all([
        child.status,
        new Response(child.stderr).text(),
        (async () => {
          while (!(await reader.read()).done) { /* drain */ }
        })(),
      ]);
      assert(status.success, `the holder process failed: ${stderr}`);
      return stderr;
    },
  };
}

async function claimAll(handles: readonly Store[], now: number): Promise<boolean[]> {
  return await Promise.all(
    handles.map((handle, n) =>
      handle.leases.claimDelivery({ owner: `owner-${n}`, ttlMs: 1_000, now })
    ),
  );
}

/** Cases of the delivery lease. */
export const LEASES_CONTRACT: readonly ContractCase[] = [
  {
    name: "leases: the delivery lease is held by one owner until it lapses or is given up",
    async run({ store, another }) {
      const other = await another();
      const now = 1_000_000;
      assert(await store.leases.claimDelivery({ owner: "a", ttlMs: 100, now }), "free: taken");
      assertEquals(await other.leases.claimDelivery({ owner: "b", ttlMs: 100, now }), false);
      assertEquals(
        await other.leases.claimDelivery({ owner: "b", ttlMs: 100, now: now + 99 }),
        false,
      );
      // The holder renews it, from any handle.
      assert(
        await other.leases.claimDelivery({ owner: "a", ttlMs: 100, now: now + 50 }),
        "renewed",
      );
      assertEquals(
        await store.leases.claimDelivery({ owner: "b", ttlMs: 100, now: now + 149 }),
        false,
        "renewing moved the expiry",
      );
      // Lapsed: anyone takes it, and then it is theirs.
      assert(await store.leases.claimDelivery({ owner: "b", ttlMs: 100, now: now + 150 }));
      assertEquals(
        await other.leases.claimDelivery({ owner: "a", ttlMs: 100, now: now + 151 }),
        false,
      );

      // Only the holder gives it up.
      await other.leases.releaseDelivery("a");
      assertEquals(
        await other.leases.claimDelivery({ owner: "c", ttlMs: 100, now: now + 160 }),
        false,
      );
      await other.leases.releaseDelivery("b");
      assert(
        await other.leases.claimDelivery({ owner: "c", ttlMs: 100, now: now + 160 }),
        "given up: free",
      );
      await store.leases.releaseDelivery("c");
      await store.leases.releaseDelivery("c");
      assert(await store.leases.claimDelivery({ owner: "a", ttlMs: 100, now: now + 160 }));
    },
  },
  {
    name: "leases: handles claiming the free lease at once: exactly one gets it",
    async run({ store, another }) {
      const handles = [store, await another(), await another(), store];
      const now = 2_000_000;
      const first = await claimAll(handles, now);
      assertEquals(first.filter(Boolean).length, 1, "one holder");
      const holder = first.indexOf(true);
      // Lapsed: again exactly one, and the holder keeps renewing meanwhile.
      const second = await claimAll(handles, now + 1_000);
      assertEquals(second.filter(Boolean).length, 1, "one holder after it lapsed");
      const third = await claimAll(handles, now + 1_500);
      assertEquals(third, second, "the new holder keeps it; the others are refused");
      assert(holder >= 0);
    },
  },
  {
    name:
      "leases: a lease held by a live process is respected; once that process is gone it is taken",
    async run(env) {
      const { store } = env;
      const holder = await holderProcess(env, "child");
      let exited = false;
      try {
        assertEquals(holder.said, "held");
        assertEquals(
          await store.leases.claimDelivery({ owner: "parent", ttlMs: 1_000 }),
          false,
          "held by a running process",
        );
        await holder.exit();
        exited = true;
      } finally {
        if (!exited) await holder.exit();
      }
      // Not lapsed (an hour), but its holder is gone: taken.
      assert(
        await store.leases.claimDelivery({ owner: "parent", ttlMs: 1_000 }),
        "taken from a gone holder",
      );
      const other = await env.another();
      assertEquals(
        await other.leases.claimDelivery({ owner: "third", ttlMs: 1_000 }),
        false,
        "a live holder in this process is respected",
      );
    },
  },
];
