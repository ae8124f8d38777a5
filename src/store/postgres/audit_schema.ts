/**
 * PostgreSQL adapter: the DDL of the audit chain's tables and of its commit
 * function, as migrations 1 and 2 create them (the adapter that uses them is
 * `audit.ts`).
 *
 * @module
 */

/** Tables of this part, in migration 1. */
export const AUDIT_SCHEMA = `
  create table toolgate_audit_head (
    id boolean primary key default true check (id),
    seq bigint not null check (seq >= 1),
    hash text not null,
    timestamp text not null,
    version text not null
  );
  create table toolgate_audit_entries (
    seq bigint primary key check (seq >= 1),
    bytes bytea not null,
    version text not null
  );
  create function toolgate_audit_commit(
    p_guard_version text,
    p_tail_seq bigint,
    p_tail_versions text[],
    p_seqs bigint[],
    p_lengths integer[],
    p_bytes bytea,
    p_head_seq bigint,
    p_head_hash text,
    p_head_timestamp text,
    p_bump_deliveries boolean
  ) returns text
  language plpgsql
  as $$
  declare
    v_locked text;
    v_tail text;
    v_stamp text;
  begin
    -- Every check comes before the first write: a lost race writes nothing.
    if p_guard_version is not null then
      -- Waits for a commit that holds the head; READ COMMITTED then reads the row it left.
      select version into v_locked from toolgate_audit_head where id for update;
      if v_locked is distinct from p_guard_version then
        return null;
      end if;
    end if;
    -- Entries are written only by the holder of the head: under its lock they stand still.
    -- (A first commit holds no lock yet: one racing it makes its head insert below conflict.)
    if p_tail_seq > 0 then
      select version into v_tail from toolgate_audit_entries where seq = p_tail_seq;
      if cardinality(p_tail_versions) = 0 then
        if found then
          return null;
        end if;
      elsif not found or not (v_tail = all (p_tail_versions)) then
        return null;
      end if;
    end if;
    if exists (select from toolgate_audit_entries where seq = p_seqs[1]) then
      return null;
    end if;
    v_stamp := lpad(nextval('toolgate_stamp_seq')::text, 20, '0');
    if p_guard_version is null then
      -- The first commit: of two, the primary key lets one in (the other waits, then does nothing).
      insert into toolgate_audit_head (id, seq, hash, timestamp, version)
      values (true, p_head_seq, p_head_hash, p_head_timestamp, v_stamp)
      on conflict (id) do nothing;
      if not found then
        return null;
      end if;
    else
      update toolgate_audit_head
      set seq = p_head_seq, hash = p_head_hash, timestamp = p_head_timestamp, version = v_stamp
      where id;
    end if;
    -- p_bytes holds the entries one after another, p_lengths says where each ends.
    insert into toolgate_audit_entries (seq, bytes, version)
    select batch.seq, substring(p_bytes from batch.start::integer for batch.length), v_stamp
    from (
      select u.seq, u.length, sum(u.length) over (order by u.ord) - u.length + 1 as start
      from unnest(p_seqs, p_lengths) with ordinality as u (seq, length, ord)
    ) as batch
    on conflict (seq) do update set bytes = excluded.bytes, version = excluded.version;
    if p_bump_deliveries then
      -- As bumpCounter() in _context.ts: the listening instances hear of it on commit.
      update toolgate_counters set value = value + 1 where name = 'deliveries';
      perform pg_notify('toolgate_changes', 'deliveries');
    end if;
    return v_stamp;
  end
  $$;
`;

/**
 * Migration 2: the Merkle tree's tiles (written in the entries' commit), the
 * head's tree size (`null`: a log written before the tree, built on the
 * next append), the signing keys and the latest checkpoint; the commit
 * function takes the tiles.
 */
export const AUDIT_TREE_SCHEMA = `
  alter table toolgate_audit_head add column tree bigint;
  create table toolgate_audit_tiles (
    level smallint not null check (level >= 0),
    idx bigint not null check (idx >= 0),
    hashes bytea not null,
    primary key (level, idx)
  );
  create table toolgate_audit_keys (
    id text primary key,
    record jsonb not null
  );
  create table toolgate_audit_checkpoint (
    id boolean primary key default true check (id),
    size bigint not null,
    note text not null
  );
  drop function toolgate_audit_commit(
    text, bigint, text[], bigint[], integer[], bytea, bigint, text, text, boolean
  );
  create function toolgate_audit_commit(
    p_guard_version text,
    p_tail_seq bigint,
    p_tail_versions text[],
    p_seqs bigint[],
    p_lengths integer[],
    p_bytes bytea,
    p_head_seq bigint,
    p_head_hash text,
    p_head_timestamp text,
    p_head_tree bigint,
    p_tile_levels smallint[],
    p_tile_indexes bigint[],
    p_tile_lengths integer[],
    p_tile_bytes bytea,
    p_bump_deliveries boolean
  ) returns text
  language plpgsql
  as $$
  declare
    v_locked text;
    v_tail text;
    v_stamp text;
  begin
    -- Every check comes before the first write: a lost race writes nothing.
    if p_guard_version is not null then
      -- Waits for a commit that holds the head; READ COMMITTED then reads the row it left.
      select version into v_locked from toolgate_audit_head where id for update;
      if v_locked is distinct from p_guard_version then
        return null;
      end if;
    end if;
    -- Entries are written only by the holder of the head: under its lock they stand still.
    -- (A first commit holds no lock yet: one racing it makes its head insert below conflict.)
    if p_tail_seq > 0 then
      select version into v_tail from toolgate_audit_entries where seq = p_tail_seq;
      if cardinality(p_tail_versions) = 0 then
        if found then
          return null;
        end if;
      elsif not found or not (v_tail = all (p_tail_versions)) then
        return null;
      end if;
    end if;
    if exists (select from toolgate_audit_entries where seq = coalesce(p_seqs[1], p_head_seq + 1)) then
      return null;
    end if;
    v_stamp := lpad(nextval('toolgate_stamp_seq')::text, 20, '0');
    if p_guard_version is null then
      -- The first commit: of two, the primary key lets one in (the other waits, then does nothing).
      insert into toolgate_audit_head (id, seq, hash, timestamp, tree, version)
      values (true, p_head_seq, p_head_hash, p_head_timestamp, p_head_tree, v_stamp)
      on conflict (id) do nothing;
      if not found then
        return null;
      end if;
    else
      update toolgate_audit_head
      set seq = p_head_seq, hash = p_head_hash, timestamp = p_head_timestamp, tree = p_head_tree,
        version = v_stamp
      where id;
    end if;
    -- p_bytes holds the entries one after another, p_lengths says where each ends.
    insert into toolgate_audit_entries (seq, bytes, version)
    select batch.seq, substring(p_bytes from batch.start::integer for batch.length), v_stamp
    from (
      select u.seq, u.length, sum(u.length) over (order by u.ord) - u.length + 1 as start
      from unnest(p_seqs, p_lengths) with ordinality as u (seq, length, ord)
    ) as batch
    on conflict (seq) do update set bytes = excluded.bytes, version = excluded.version;
    -- The tiles likewise, in p_tile_bytes (most commits have none: no statement then).
    if cardinality(p_tile_levels) > 0 then
      insert into toolgate_audit_tiles (level, idx, hashes)
      select batch.level, batch.idx, substring(p_tile_bytes from batch.start::integer for batch.length)
      from (
        select u.level, u.idx, u.length, sum(u.length) over (order by u.ord) - u.length + 1 as start
        from unnest(p_tile_levels, p_tile_indexes, p_tile_lengths) with ordinality
          as u (level, idx, length, ord)
      ) as batch
      on conflict (level, idx) do update set hashes = excluded.hashes;
    end if;
    if p_bump_deliveries then
      -- As bumpCounter() in _context.ts: the listening instances hear of it on commit.
      update toolgate_counters set value = value + 1 where name = 'deliveries';
      perform pg_notify('toolgate_changes', 'deliveries');
    end if;
    return v_stamp;
  end
  $$;
`;
