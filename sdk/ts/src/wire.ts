// What the client (client.ts) and its streams (subscription.ts) share,
// so that neither imports the other's module back: records and their
// conversion from the wire, filter specs, call options, node addresses and
// the connections to a node. client.ts imports subscription.ts; both
// import this.

import { type MessageInitShape } from "@bufbuild/protobuf";
import { type Client as ConnectClient } from "@connectrpc/connect";
import { type AuthService } from "./gen/rewind/v1/auth_pb.js";
import { type ClusterService } from "./gen/rewind/v1/cluster_pb.js";
import { type EventStoreService } from "./gen/rewind/v1/eventstore_pb.js";
import { type GroupService } from "./gen/rewind/v1/group_pb.js";
import { type PluginService } from "./gen/rewind/v1/plugin_pb.js";
import { type PublishService } from "./gen/rewind/v1/publish_pb.js";
import { type Record as RecordProto } from "./gen/rewind/v1/record_pb.js";
import { type ReplayFilter, type ReplayFilterSchema, type SubscribeService } from "./gen/rewind/v1/subscribe_pb.js";
import { type TopicService } from "./gen/rewind/v1/topic_pb.js";
import { Code, ConnectError, RewindError } from "./errors.js";

/** Options every call takes. */
export interface CallOptions {
  /**
   * Aborts the call: it fails with a Canceled RewindError whose cause is
   * signal.reason, or DeadlineExceeded when the reason is a TimeoutError
   * (AbortSignal.timeout(ms)).
   */
  signal?: AbortSignal;
  /**
   * A deadline for the whole call, retries included, in ms (default: none
   * beyond each attempt's). Past it the call fails with DeadlineExceeded.
   */
  timeoutMs?: number;
}

/** A header of a record. */
export interface Header {
  key: string;
  value: Uint8Array;
}

/** Bytes, or a string (sent as UTF-8). */
export type Bytes = Uint8Array | string;

/**
 * A delivered record. (Named so as not to shadow TypeScript's own
 * Record<K, V>; the old name Record is a deprecated alias.)
 */
export interface RewindRecord {
  partition: number;
  offset: bigint;
  messageId: string;
  /** The broker's append time (millisecond precision; appendTimeUnixNanos is exact). */
  appendTime: Date;
  appendTimeUnixNanos: bigint;
  key: Uint8Array;
  value: Uint8Array;
  headers: Header[];
  idempotencyKey: string;
  /** The producer's timestamp, if it sent one. */
  eventTime?: Date;
  /** The record's place in its key's history (0, 1, 2, ... within its partition); undefined for a record without a key. */
  keyVersion?: bigint;
}

/** @deprecated Use RewindRecord: this name shadows TypeScript's Record<K, V> where it is imported. */
export type Record = RewindRecord;

/** A filter a stream or a plugin test runs: a registered plugin ("NAME", "NAME@VERSION", "sha256:HEX") or a module sent inline. */
export interface FilterSpec {
  plugin?: string;
  module?: Uint8Array;
  /** Given to the module's rewind_init (e.g. JSON). */
  config?: Bytes;
}

/** @internal the Connect clients of one node (Client.conn). */
export type Clients = {
  url: string;
  topics: ConnectClient<typeof TopicService>;
  publish: ConnectClient<typeof PublishService>;
  subscribe: ConnectClient<typeof SubscribeService>;
  groups: ConnectClient<typeof GroupService>;
  plugins: ConnectClient<typeof PluginService>;
  cluster: ConnectClient<typeof ClusterService>;
  store: ConnectClient<typeof EventStoreService>;
  auth: ConnectClient<typeof AuthService>;
};

/**
 * @internal Unary is Client.unary: it runs call on a node, and again as
 * kind and the retry policy allow (again: the call may run twice).
 */
export type Unary = <T>(
  kind: { again: boolean; bytes?: number },
  opts: CallOptions | undefined,
  call: (c: Clients, signal: AbortSignal) => Promise<T>,
) => Promise<T>;

const utf8 = new TextEncoder();

/** bytes turns a string into UTF-8 bytes; bytes stay as they are. */
export function bytes(b: Bytes | undefined): Uint8Array {
  if (b === undefined) return new Uint8Array();
  return typeof b === "string" ? utf8.encode(b) : b;
}

/** text decodes UTF-8 bytes (a record's key or value) into a string. */
export function text(b: Uint8Array): string {
  return new TextDecoder().decode(b);
}

/**
 * headerText is the value of record's first header named name, decoded
 * from UTF-8, or undefined when it has none. Header names are compared
 * exactly (case matters). headerTexts returns every such value.
 *
 *     const source = headerText(r, "source") ?? "unknown";
 */
export function headerText(record: { headers: readonly Header[] }, name: string): string | undefined {
  const h = record.headers.find((h) => h.key === name);
  return h ? text(h.value) : undefined;
}

/** headerTexts is the values of every header of record named name, in order, decoded from UTF-8. */
export function headerTexts(record: { headers: readonly Header[] }, name: string): string[] {
  return record.headers.filter((h) => h.key === name).map((h) => text(h.value));
}

/** normalize turns a node address into the base URL calls use. */
export function normalize(addr: string): string {
  addr = addr.trim();
  if (!addr.includes("://")) addr = "http://" + addr;
  return addr.replace(/\/+$/, "");
}

/** @internal */
export function filterProto(f: FilterSpec): MessageInitShape<typeof ReplayFilterSchema> {
  if ((f.plugin === undefined) === (f.module === undefined)) {
    throw new RewindError(new ConnectError("a filter names a plugin or carries a module (one of them)", Code.InvalidArgument));
  }
  const module: ReplayFilter["module"] =
    f.plugin !== undefined ? { case: "plugin", value: f.plugin } : { case: "inline", value: f.module! };
  return { module, config: bytes(f.config) };
}

/** @internal recordOf converts a delivered record. */
export function recordOf(r: RecordProto): RewindRecord {
  return {
    partition: r.partition,
    offset: r.offset,
    messageId: r.messageId,
    appendTime: new Date(Number(r.appendTimeUnixNanos / 1_000_000n)),
    appendTimeUnixNanos: r.appendTimeUnixNanos,
    key: r.key,
    value: r.value,
    headers: r.headers.map((h) => ({ key: h.key, value: h.value })),
    idempotencyKey: r.idempotencyKey,
    eventTime: r.eventTimeUnixNanos !== 0n ? new Date(Number(r.eventTimeUnixNanos / 1_000_000n)) : undefined,
    keyVersion: r.keyVersion,
  };
}
