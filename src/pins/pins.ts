/**
 * Pinning of upstream definitions: toolgate remembers what each upstream's
 * tools, prompts and resource templates were when first seen (their pin, in
 * the store, shared by every instance), and holds back one whose definition
 * changes — a "rug pull": an upstream that rewrites a trusted tool's
 * description or schema — until an administrator approves or rejects the
 * change. Under `pinning: "approve"` a new one is held too. Every pin, change
 * and decision is an audit entry (`pin.created`, `pin.changed`,
 * `pin.approved`, `pin.rejected`).
 *
 * {@linkcode ToolPins} is the gateway's {@linkcode PinGuard} in a server and
 * the administrator's handle (`toolgate tools pins|diff|approve|reject`,
 * REST `/pins`) everywhere.
 *
 * @module
 */
import type { AuditAppendInput } from "../audit/mod.ts";
import { GatewayError } from "../errors/mod.ts";
import type { PinGuard, PinSubject } from "../gateway/mod.ts";
import type { PinKind, Store, ToolPinRecord } from "../store/mod.ts";
import { changedFields, definitionDiff, pinHash, pinnedDefinition } from "./definition.ts";

/** `plugins.upstream_settings.pinning`, when on. */
export type PinningMode = "tofu" | "approve";

/** Where pin entries go: the audit log's `append`. */
export type PinAudit = (input: AuditAppendInput) => Promise<unknown>;

/** Options of {@linkcode ToolPins}. */
export interface ToolPinsOptions {
  /** The store holding the pins. */
  store: Store;
  /** Pin at first sight (`tofu`) or hold new ones too (`approve`). @default "tofu" */
  mode?: PinningMode;
  /** Records pins, changes and decisions. @default none */
  audit?: PinAudit;
  /** Told of each definition quarantined or held (for the `tool.quarantined` event). @default none */
  onQuarantined?: (pin: PinView) => void;
  /** Clock, ms since the epoch. @default Date.now */
  now?: () => number;
}

/** A pin as the CLI, REST and the console show it. */
export interface PinView {
  /** The name clients see (`<plugin>__<tool>`); the upstream's own name when never offered. */
  tool: string;
  plugin: string;
  kind: PinKind;
  /** The upstream's own name. */
  name: string;
  status: ToolPinRecord["status"];
  /** SHA-256 (hex) of the pinned definition; `null`: none approved yet. */
  pinned_sha256: string | null;
  /** SHA-256 of the definition waiting (or rejected); `null`: none. */
  pending_sha256: string | null;
  /** The pinned fields that differ between the two (all of them for a new one). */
  changed: string[];
  decided_by: string | null;
  updated_at: string;
}

/** A pin with both definitions and their diff (`toolgate tools diff`, `GET /pins/{tool}`). */
export interface PinDiff extends PinView {
  pinned: Record<string, unknown> | null;
  pending: Record<string, unknown> | null;
  /** Unified diff of the pinned definition against the waiting one; empty when none waits. */
  diff: string;
}

/** Most attempts at storing one pin while other instances write it too. */
const MAX_PUT_ATTEMPTS = 20;

/**
 * Longest definition kept in a pin, as canonical JSON bytes: a pin holds two
 * (the pinned and the offered one) and a Deno KV value is at most 64 KiB. A
 * longer one is pinned by its hash alone; its diff then says so.
 */
export const PIN_DEFINITION_MAX_BYTES = 24 * 1024;

/** The definition as a pin keeps it: itself, or a note of its size when too large. */
function kept(definition: Record<string, unknown>): Record<string, unknown> {
  const bytes = new TextEncoder().encode(JSON.stringify(definition)).length;
  return bytes <= PIN_DEFINITION_MAX_BYTES ? definition : {
    "$toolgate": `definition of ${bytes} bytes not kept (over ${PIN_DEFINITION_MAX_BYTES}); ` +
      "compare the SHA-256 hashes",
  };
}

function viewOf(record: ToolPinRecord): PinView {
  const { pinned, pending } = record;
  return {
    tool: record.exposed ?? record.name,
    plugin: record.plugin,
    kind: record.kind,
    name: record.name,
    status: record.status,
    pinned_sha256: pinned?.hash ?? null,
    pending_sha256: pending?.hash ?? null,
    changed: pending
      ? changedFields(record.kind, pinned?.definition ?? {}, pending.definition)
      : [],
    decided_by: record.decided_by,
    updated_at: record.updated_at,
  };
}

/** What a caller of a held-back definition is told. */
function quarantined(record: ToolPinRecord): GatewayError {
  const view = viewOf(record);
  const what = record.kind === "tool"
    ? "Tool"
    : record.kind === "prompt"
    ? "Prompt"
    : "Resource template";
  const name = view.tool;
  const message = record.status === "new"
    ? `${what} ${name} is new and held until an administrator approves it (pinning: approve); ` +
      `see toolgate tools diff ${name}, then toolgate tools approve ${name}`
    : record.status === "rejected"
    ? `${what} ${name} is quarantined: its upstream's changed definition (${
      view.changed.join(", ")
    }) was rejected by ${
      record.decided_by ?? "an administrator"
    }; it stays out while the upstream offers it`
    : `${what} ${name} is quarantined: its upstream changed ${
      view.changed.join(", ")
    } since it was pinned; see toolgate tools diff ${name}, then toolgate tools approve ${name} or reject ${name}`;
  return new GatewayError("TOOL_QUARANTINED", message, {
    details: {
      tool: name,
      plugin: record.plugin,
      status: record.status,
      changed: view.changed,
      pinned_sha256: view.pinned_sha256,
      offered_sha256: view.pending_sha256,
    },
  });
}

/**
 * The pins of a store: checks what upstreams offer ({@linkcode PinGuard}),
 * and lists, shows and decides pins for administrators.
 */
export class ToolPins implements PinGuard {
  #store: Store;
  #mode: PinningMode;
  #audit: PinAudit | undefined;
  #onQuarantined: ((pin: PinView) => void) | undefined;
  #now: () => number;
  #listeners = new Set<() => Promise<void> | void>();

  /** @param options The store, the mode and where entries go. */
  constructor(options: ToolPinsOptions) {
    this.#store = options.store;
    this.#mode = options.mode ?? "tofu";
    this.#audit = options.audit;
    this.#onQuarantined = options.onQuarantined;
    this.#now = options.now ?? Date.now;
  }

  async admit(plugin: string, offered: readonly PinSubject[]): Promise<Map<string, GatewayError>> {
    const held = new Map<string, GatewayError>();
    for (const subject of offered) {
      const record = await this.#see(plugin, subject);
      if (record.status !== "pinned") held.set(subject.exposed, quarantined(record));
    }
    return held;
  }

  onChange(listener: () => Promise<void> | void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Tells the listeners that pins changed (a server calls it when the
   * store's registrations moved) and waits for them.
   */
  async changed(): Promise<void> {
    await Promise.allSettled([...this.#listeners].map(async (listener) => await listener()));
  }

  /** Every pin; only those waiting for a decision (or rejected) with `changed`. */
  async list(options: { changed?: boolean } = {}): Promise<PinView[]> {
    const records = await this.#store.pins.list();
    return records.filter((record) => !options.changed || record.status !== "pinned").map(viewOf);
  }

  /**
   * One pin with both definitions and their diff.
   *
   * @throws {GatewayError} `NOT_FOUND` when no pin has that name.
   */
  async diff(tool: string): Promise<PinDiff> {
    const record = await this.#find(tool);
    const view = viewOf(record);
    return {
      ...view,
      pinned: record.pinned?.definition ?? null,
      pending: record.pending?.definition ?? null,
      diff: record.pending
        ? await definitionDiff(
          view.tool,
          record.pinned?.definition ?? null,
          record.pending.definition,
        )
        : "",
    };
  }

  /**
   * Approves what `tool` offers now (it becomes the pin and is listed
   * again); `"*"`: every pin waiting for a decision.
   *
   * @returns The pins approved.
   * @throws {GatewayError} `NOT_FOUND` when no pin has that name, `CONFLICT`
   * when it has nothing waiting.
   */
  async approve(tool: string, by: string): Promise<PinView[]> {
    return await this.#decide(tool, by, "approved");
  }

  /**
   * Rejects what `tool` offers now: it stays out while its upstream offers
   * that definition (the pin stays what it was).
   *
   * @throws {GatewayError} `NOT_FOUND` when no pin has that name, `CONFLICT`
   * when it has nothing waiting.
   */
  async reject(tool: string, by: string): Promise<PinView[]> {
    return await this.#decide(tool, by, "rejected");
  }

  async #decide(tool: string, by: string, decision: "approved" | "rejected"): Promise<PinView[]> {
    const targets = tool === "*"
      ? (await this.#store.pins.list()).filter((r) => r.status === "changed" || r.status === "new")
      : [await this.#find(tool)];
    const out: PinView[] = [];
    for (const target of targets) {
      const record = await this.#update(target, (current) => {
        if (!current.pending || current.status === "pinned") {
          throw new GatewayError(
            "CONFLICT",
            `Pin ${current.exposed ?? current.name} has no changed definition waiting: nothing to ${
              decision === "approved" ? "approve" : "reject"
            }`,
            { details: { tool: current.exposed ?? current.name, status: current.status } },
          );
        }
        if (decision === "rejected" && current.status === "rejected") return null;
        return decision === "approved"
          ? { ...current, status: "pinned", pinned: current.pending, pending: null, decided_by: by }
          : { ...current, status: "rejected", decided_by: by };
      });
      const view = viewOf(record);
      await this.#record(decision === "approved" ? "pin.approved" : "pin.rejected", view, {
        ...(decision === "approved" ? { approved_sha256: view.pinned_sha256 } : {
          rejected_sha256: view.pending_sha256,
          pinned_sha256: view.pinned_sha256,
        }),
        decided_by: by,
      });
      out.push(view);
    }
    // This instance's proxies list (or hold) what was decided before the answer goes.
    if (out.length) await this.changed();
    return out;
  }

  /** The pin of `tool`: by the name clients see, else `<plugin>__<name>` or its own name. */
  async #find(tool: string): Promise<ToolPinRecord> {
    const records = await this.#store.pins.list();
    const found = records.find((r) => r.exposed === tool) ??
      records.find((r) => `${r.plugin}__${r.name}` === tool) ??
      records.find((r) => r.name === tool);
    if (!found) {
      throw new GatewayError(
        "NOT_FOUND",
        `No pin named ${JSON.stringify(tool)}; see toolgate tools pins`,
        { details: { tool } },
      );
    }
    return found;
  }

  /** The pin of what `plugin` offers as `subject`, made, moved or as it is. */
  async #see(plugin: string, subject: PinSubject): Promise<ToolPinRecord> {
    const definition = pinnedDefinition(subject.kind, subject.listing);
    const hash = pinHash(definition);
    const at = new Date(this.#now()).toISOString();
    const seen = { hash, definition: kept(definition), seen_at: at };
    for (let attempt = 1;; attempt++) {
      const current = await this.#store.pins.get(plugin, subject.kind, subject.name);
      let next: ToolPinRecord | null = null;
      let entry: "pin.created" | "pin.changed" | undefined;
      if (!current) {
        entry = "pin.created";
        next = {
          plugin,
          kind: subject.kind,
          name: subject.name,
          exposed: subject.exposed,
          ...(this.#mode === "tofu"
            ? { status: "pinned", pinned: seen, pending: null }
            : { status: "new", pinned: null, pending: seen }),
          decided_by: null,
          updated_at: at,
        };
      } else if (current.pinned?.hash === hash) {
        // What was trusted (again: an upstream that undid a change is listed as before).
        if (current.status !== "pinned" || current.exposed !== subject.exposed) {
          next = {
            ...current,
            status: "pinned",
            pending: null,
            exposed: subject.exposed,
            updated_at: at,
          };
        }
      } else if (current.pending?.hash !== hash) {
        entry = "pin.changed";
        next = {
          ...current,
          exposed: subject.exposed,
          status: current.pinned ? "changed" : "new",
          pending: seen,
          updated_at: at,
        };
      }
      if (!next) return current!;
      if (await this.#store.pins.put(next, current)) {
        if (entry) {
          const view = viewOf(next);
          await this.#record(entry, view, {
            sha256: hash,
            ...(current?.pinned ? { pinned_sha256: current.pinned.hash } : {}),
          });
          if (next.status !== "pinned") this.#onQuarantined?.(view);
        }
        return next;
      }
      if (attempt >= MAX_PUT_ATTEMPTS) {
        throw new GatewayError(
          "UNAVAILABLE",
          `Cannot pin ${subject.exposed}: other instances kept changing its pin`,
        );
      }
    }
  }

  /** Applies `change` to the stored pin, reading it again when another writer moved it. */
  async #update(
    record: ToolPinRecord,
    change: (current: ToolPinRecord) => ToolPinRecord | null,
  ): Promise<ToolPinRecord> {
    let current: ToolPinRecord | null = record;
    for (let attempt = 1; attempt <= MAX_PUT_ATTEMPTS; attempt++) {
      if (!current) break;
      const next = change(current);
      if (!next) return current;
      const stamped = { ...next, updated_at: new Date(this.#now()).toISOString() };
      if (await this.#store.pins.put(stamped, current)) return stamped;
      current = await this.#store.pins.get(record.plugin, record.kind, record.name);
    }
    if (!current) {
      throw new GatewayError("NOT_FOUND", `Pin ${record.exposed ?? record.name} was removed`);
    }
    throw new GatewayError(
      "UNAVAILABLE",
      `Cannot decide pin ${record.exposed ?? record.name}: other instances kept changing it`,
    );
  }

  async #record(
    kind: "pin.created" | "pin.changed" | "pin.approved" | "pin.rejected",
    view: PinView,
    input: Record<string, unknown>,
  ): Promise<void> {
    await this.#audit?.({
      kind,
      tool: view.tool,
      input: { plugin: view.plugin, pin_kind: view.kind, name: view.name, ...input },
      outcome: { ok: true, status: view.status, changed: view.changed },
    });
  }
}
