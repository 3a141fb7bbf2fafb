// The event store, as the Go client has it (sdk/client/eventstore.go):
// load one key's history (an entity), decide, and append only if nobody
// appended to the key since (Client.append with expectVersion); or read
// what a query over types and tags matches and append only if nothing
// matching came after the position read (failIfMatched: dynamic
// consistency boundaries).
//
// This module holds the conditions, queries, read options and results,
// and their conversion to and from the wire; Client.append, readKey and
// query (client.ts) send them. It imports neither client.ts nor
// subscription.ts.

import { type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type ReadRequestSchema, type ReadResponse } from "./gen/rewind/v1/eventstore_pb.js";
import { Expect, type AppendConditionSchema, type KeyExpectationSchema } from "./gen/rewind/v1/publish_pb.js";
import { type QuerySchema } from "./gen/rewind/v1/query_pb.js";
import { Code, ConnectError, RewindError } from "./errors.js";
import { bytes, recordOf, text, type Bytes, type CallOptions, type RewindRecord } from "./wire.js";

/** The header the server indexes as a record's type (Message.type). */
export const TYPE_HEADER = "rewind-type";
/** The header, repeatable, the server indexes as a record's tags (Message.tags). */
export const TAG_HEADER = "rewind-tag";

/**
 * Condition is one condition of a conditional append (Client.append). Make
 * it with expectVersion, expectNone, expectExists, expectAny, forKey or
 * failIfMatched; its fields are for reading, not for building one.
 */
export type Condition =
  | {
      readonly kind: "key";
      /** The key the expectation is about; undefined: the append's key. */
      readonly key?: Uint8Array;
      readonly expect: "any" | "none" | "exists" | "version";
      /** With expect "version": the version the key's last record must have. */
      readonly version: bigint;
    }
  | {
      readonly kind: "query";
      readonly query: QueryItem[];
      /** The position read (ReadResult.position); undefined: no matching record may exist at all. */
      readonly after?: bigint;
    };

/**
 * QueryItem matches a record whose type is one of types (any type when
 * empty or absent) and that carries every tag of tags. An item with
 * neither matches nothing.
 */
export interface QueryItem {
  types?: string[];
  tags?: string[];
}

/** Query selects records by type and tags: a record matches when any item does. One item may be given alone. */
export type Query = QueryItem | QueryItem[];

const U64_MAX = (1n << 64n) - 1n;

function u64(n: number | bigint, what: string): bigint {
  let v: bigint;
  try {
    v = BigInt(n);
  } catch {
    throw invalid(`${what} ${String(n)} is not an integer`);
  }
  if (v < 0n || v > U64_MAX) throw invalid(`${what} ${v} is not an unsigned 64-bit integer`);
  return v;
}

function invalid(msg: string): RewindError {
  return new RewindError(new ConnectError(msg, Code.InvalidArgument));
}

/** expectVersion appends only if the key's last version is v: the keyVersion of the last record the writer loaded (ReadResult.head). */
export function expectVersion(v: number | bigint): Condition {
  return { kind: "key", expect: "version", version: u64(v, "expected version") };
}

/** expectNone appends only if the key has no record (a new entity). */
export function expectNone(): Condition {
  return { kind: "key", expect: "none", version: 0n };
}

/** expectExists appends only if the key has a record. */
export function expectExists(): Condition {
  return { kind: "key", expect: "exists", version: 0n };
}

/** expectAny appends whatever the key's history (no check; the append is still all or nothing). */
export function expectAny(): Condition {
  return { kind: "key", expect: "any", version: 0n };
}

/**
 * forKey applies an expectation to another key than the append's: a
 * multi-key atomic append (the keys must share a partition).
 */
export function forKey(key: Bytes, cond: Condition): Condition {
  if (cond.kind !== "key") throw new TypeError("forKey takes an expectation (expectVersion, expectNone, expectExists, expectAny), not a query condition");
  return { ...cond, key: bytes(key).slice() };
}

/**
 * failIfMatched appends only if no record matching query was appended
 * after position (ReadResult.position of the read that decided;
 * undefined: no matching record may exist at all).
 */
export function failIfMatched(query: Query, position?: number | bigint): Condition {
  return { kind: "query", query: items(query), after: position === undefined ? undefined : u64(position, "position") };
}

function items(q: Query): QueryItem[] {
  return (Array.isArray(q) ? q : [q]).map((it) => ({ types: [...(it.types ?? [])], tags: [...(it.tags ?? [])] }));
}

/** @internal queryProto is q on the wire. */
export function queryProto(q: Query): MessageInitShape<typeof QuerySchema> {
  return { items: items(q).map((it) => ({ types: it.types, tags: it.tags })) };
}

const EXPECT = { any: Expect.ANY_UNSPECIFIED, none: Expect.NONE, exists: Expect.EXISTS, version: Expect.VERSION } as const;

/**
 * @internal conditionsProto is the expectations and conditions of an
 * append of key: as the Go client, an append without an expectation of
 * its own key still names the key (expecting anything), so it is one
 * atomic, conditional append.
 */
export function conditionsProto(
  key: Uint8Array,
  conds: Condition[],
): { expectations: MessageInitShape<typeof KeyExpectationSchema>[]; conditions: MessageInitShape<typeof AppendConditionSchema>[] } {
  const expectations: MessageInitShape<typeof KeyExpectationSchema>[] = [];
  const conditions: MessageInitShape<typeof AppendConditionSchema>[] = [];
  for (const c of conds) {
    if (c.kind === "query") {
      conditions.push({ query: queryProto(c.query), after: c.after });
      continue;
    }
    const expect = EXPECT[c.expect];
    if (expect === undefined) throw invalid(`unknown expectation ${String(c.expect)}`);
    expectations.push({ key: c.key ?? key, expect, version: c.version });
  }
  if (expectations.length === 0 && conditions.length === 0) expectations.push({ key, expect: Expect.ANY_UNSPECIFIED, version: 0n });
  return { expectations, conditions };
}

/** Options of readKey and query. At most one of fromVersion, fromOffset, fromTime and last. */
export interface ReadOptions extends CallOptions {
  /** Key reads: start at this version (end there with backward). */
  fromVersion?: number | bigint;
  /** Start at the first matching record at or after this offset (at or before it with backward). */
  fromOffset?: number | bigint;
  /** Start at the first matching record appended at or after this time (the last one before it with backward). */
  fromTime?: Date;
  /** The last n matching records (oldest first; newest first with backward). */
  last?: number | bigint;
  /** Newest first. */
  backward?: boolean;
  /** At most this many records (default and maximum 10,000). */
  limit?: number;
  /**
   * The partition: required by a query on a topic of several partitions,
   * and by a key published with an explicit partition (default: the key's).
   */
  partition?: number;
}

/** What readKey and query return. */
export interface ReadResult {
  partition: number;
  /** In offset order, or newest first with backward; each with its keyVersion when it has a key. */
  records: RewindRecord[];
  /** Key reads: the key's last version (undefined: the key has no record). */
  head?: bigint;
  /** Key reads: the earliest version still held (retention removes the oldest; versions keep their numbers). */
  earliest?: bigint;
  /**
   * The partition's last offset when it was read (undefined: the partition
   * is empty): pass it to failIfMatched to append only if nothing matching
   * came since.
   */
  position?: bigint;
  /** The limit cut the read short: more matching records follow. */
  more: boolean;
  /** The condition that the key is still as this read found it: expectVersion(head), or expectNone() for a key without records. */
  expect(): Condition;
}

/** @internal readRequest is a read of topic selecting key or query, with opts. */
export function readRequest(
  topic: string,
  select: { case: "key"; value: Uint8Array } | { case: "query"; value: Query },
  opts: ReadOptions = {},
): MessageInitShape<typeof ReadRequestSchema> {
  const froms = (["fromVersion", "fromOffset", "fromTime", "last"] as const).filter((k) => opts[k] !== undefined);
  if (froms.length > 1) throw invalid(`a read starts at one of fromVersion, fromOffset, fromTime and last, not ${froms.join(" and ")}`);
  let from: MessageInitShape<typeof ReadRequestSchema>["from"];
  if (opts.fromTime !== undefined) {
    if (!(opts.fromTime instanceof Date) || Number.isNaN(opts.fromTime.getTime())) throw invalid("fromTime is not a valid Date");
    from = { case: "fromTime", value: timestampFromDate(opts.fromTime) };
  } else if (froms.length === 1) {
    const k = froms[0] as "fromVersion" | "fromOffset" | "last";
    from = { case: k, value: u64(opts[k]!, k) };
  }
  if (opts.limit !== undefined && (!Number.isInteger(opts.limit) || opts.limit < 0 || opts.limit > 0xffffffff)) {
    throw invalid(`limit ${opts.limit} is not an unsigned 32-bit integer`);
  }
  return {
    topic,
    select: select.case === "key" ? select : { case: "query", value: queryProto(select.value) },
    partition: opts.partition,
    from,
    backward: opts.backward ?? false,
    limit: opts.limit ?? 0,
  };
}

/** @internal readResultOf converts a read's answer. */
export function readResultOf(r: ReadResponse): ReadResult {
  const head = r.headVersion;
  return {
    partition: r.partition,
    records: r.records.map(recordOf),
    head,
    earliest: r.earliestVersion,
    position: r.position,
    more: r.more,
    expect: () => (head === undefined ? expectNone() : expectVersion(head)),
  };
}

/** recordType is a record's type (its rewind-type header), or undefined. */
export function recordType(r: Pick<RewindRecord, "headers">): string | undefined {
  const h = r.headers.find((h) => h.key === TYPE_HEADER);
  return h ? text(h.value) : undefined;
}

/** recordTags is a record's tags (its rewind-tag headers), in order. */
export function recordTags(r: Pick<RewindRecord, "headers">): string[] {
  return r.headers.filter((h) => h.key === TAG_HEADER).map((h) => text(h.value));
}
