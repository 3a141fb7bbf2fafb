// What the client (client.ts) and its streams (subscription.ts) share,
// so that neither imports the other's module back: records and their
// conversion from the wire, filter specs, call options, node addresses and
// the connections to a node. client.ts imports subscription.ts; both
// import this.

import { type MessageInitShape } from "@bufbuild/protobuf";
import { type Client as ConnectClient } from "@connectrpc/connect";
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
  /** Aborts the call. */
  signal?: AbortSignal;
}

/** A header of a record. */
export interface Header {
  key: string;
  value: Uint8Array;
}

/** Bytes, or a string (sent as UTF-8). */
export type Bytes = Uint8Array | string;

/** A delivered record. */
export interface Record {
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
};

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
export function recordOf(r: RecordProto): Record {
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
