// The client: one or several nodes of a Rewind cluster, calls that move to
// another node when theirs fails, publishing, and the admin of topics,
// groups, plugins and the cluster, and the event store's conditional
// appends and reads. Streams are in subscription.ts, the event store's
// conditions and read results in eventstore.ts, and what they all use
// (records, filters, a node's connections) in wire.ts.
//
// Which node a call goes to (as in the Go client, sdk/client/nodes.go): the
// client uses one node at a time, the first given, until a call to it
// fails in a way that says the node is the problem — it could not be
// reached, broke the connection, gave no answer within an attempt's
// deadline, or answered Unavailable. Then the node is skipped for a penalty
// (5 s) and the next one is used. Calls that may run twice (reads, a
// publish, a commit, an alter) are retried, on the next node, for a window
// (5 s, and at least 4 attempts); the others (create, delete, upload, an
// executed reset) are sent again only when the first attempt certainly did
// nothing, and otherwise fail with outcomeUnknown set. An attempt of a call
// that may run twice at once (reads, publishes whose records all have
// idempotency keys) that has no answer after hedgeDelayMs also goes to
// another node, as in the Go client (sdk/client/hedge.go): the first
// answer wins.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { createClient as createConnectClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { Auth } from "./auth.js";
import { AuthService } from "./gen/rewind/v1/auth_pb.js";
import { ClusterService, type GetClusterStatusResponse, type ReplicaMove } from "./gen/rewind/v1/cluster_pb.js";
import { EventStoreService } from "./gen/rewind/v1/eventstore_pb.js";
import {
  GroupService,
  type GroupSummary,
  type GroupTopic,
  type ResetGroupResponse,
} from "./gen/rewind/v1/group_pb.js";
import { PluginService, type Plugin, type TestPluginResponse } from "./gen/rewind/v1/plugin_pb.js";
import {
  PublishService,
  PublishRecordSchema,
  PublishRequestSchema,
  type PublishRecord,
  type PublishResult as PublishResultProto,
} from "./gen/rewind/v1/publish_pb.js";
import { RecordSchema } from "./gen/rewind/v1/record_pb.js";
import { SubscribeService } from "./gen/rewind/v1/subscribe_pb.js";
import {
  CleanupPolicy,
  RetentionSchema,
  TopicService,
  type PartitionInfo,
  type Retention,
  type Topic,
} from "./gen/rewind/v1/topic_pb.js";
import { durationProto, type DurationLike } from "./duration.js";
import {
  TAG_HEADER,
  TYPE_HEADER,
  conditionsProto,
  readRequest,
  readResultOf,
  type Condition,
  type Query,
  type ReadOptions,
  type ReadResult,
} from "./eventstore.js";
import {
  Code,
  ConnectError,
  PartialError,
  RewindError,
  aborted,
  badNode,
  callSignal,
  noAnswer,
  notDone,
  retryable,
  toRewindError,
  unreachable,
} from "./errors.js";
import { resetTargetProto, startProto, toPosition, type PositionLike } from "./position.js";
import { Subscription, type SubscribeOptions } from "./subscription.js";
import { bytes, filterProto, normalize, type Bytes, type CallOptions, type Clients, type FilterSpec } from "./wire.js";

// Moved to duration.ts (auth.ts needs them too); still exported from here.
export { durationProto, type DurationLike };

/** Wire protocols: Connect (the default), gRPC-web, and in Node gRPC. */
export type Protocol = "connect" | "grpc-web" | "grpc";

/** A transport factory: the transport to one node's base URL. */
export type TransportFactory = (baseUrl: string) => Transport;

/** Options of createClient. */
export interface ClientOptions {
  /** The node to talk to, e.g. "http://127.0.0.1:7070" (a bare host:port means http://). */
  baseUrl?: string;
  /**
   * Several nodes of a cluster (an array, or comma-separated): calls and
   * streams go to one at a time and move to the next when it fails.
   */
  nodes?: string[] | string;
  /**
   * The protocol ("connect" by default; "grpc-web"; "grpc" only from
   * "@rewind-io/client/node"), or a function that makes the transport to a
   * node's base URL, or one Transport (then only one node is used).
   */
  transport?: Protocol | TransportFactory | Transport;
  /** Bound of one attempt of a call that may be repeated, in ms (default 2000); 0: none. */
  attemptTimeoutMs?: number;
  /** Attempts of a call that may be repeated (default 4). */
  attempts?: number;
  /** How long after its first attempt such a call is still retried, in ms (default 5000). */
  retryWindowMs?: number;
  /** How long a node that failed is skipped, in ms (default 5000). */
  nodePenaltyMs?: number;
  /**
   * How long an attempt of a call that may run twice waits for its node
   * before the same request also goes to another node, in ms (default
   * 500; 0: never, an attempt waits out attemptTimeoutMs). The first
   * answer is the call's, the other attempt is cancelled, and the node
   * that had not answered is skipped for nodePenaltyMs, so a paused or
   * cut-off node costs this much once instead of an attempt timeout. Only
   * calls that may run twice with the effect of once are hedged: reads,
   * idempotent writes, and publishes whose every record has an
   * idempotency key (given, or generated: generateIdempotencyKeys). As the
   * Go client's WithHedgeDelay.
   */
  hedgeDelayMs?: number;
  /** How long a new stream waits for its first event before it tries the next node, in ms (default 10000; 0: no bound). */
  streamOpenTimeoutMs?: number;
  /** Give every published record without an idempotency key a random one, so retries never store it twice. */
  generateIdempotencyKeys?: boolean;
  /**
   * A bearer token for a server started with --auth (`rewind user create`),
   * sent on every call made through a protocol name; a transport of your
   * own sets its headers itself.
   */
  token?: string;
}

/** A record to publish: its value alone, or the record. */
export type Message =
  | Bytes
  | {
      /** Decides the partition (hash of the key) unless partition is set. */
      key?: Bytes;
      value?: Bytes;
      /** Headers, in order: an array of pairs, or an object. */
      headers?: { key: string; value: Bytes }[] | { [key: string]: Bytes };
      /** Stored and delivered with the record; the topic stores a key once within its dedupe window. */
      idempotencyKey?: string;
      /** The producer's own timestamp. */
      eventTime?: Date;
      /** An explicit partition (overrides the key hash). */
      partition?: number;
      /** The record's type, indexed (header rewind-type): queries and failIfMatched match it. */
      type?: string;
      /** The record's tags, indexed (headers rewind-tag): queries and failIfMatched match them. */
      tags?: string[];
    };

/** Options of publish. */
export interface PublishOptions extends CallOptions {
  /**
   * An idempotency key for the request: a single record gets this key, the
   * records of a batch get key + "#" + index (0-based). Records with a key
   * of their own keep it. Publishing the same request again with the same
   * key is answered with the originals (duplicate: true) and stores nothing.
   */
  idempotencyKey?: string;
  /** Give records without a key a random one (see ClientOptions.generateIdempotencyKeys). */
  generateIdempotencyKeys?: boolean;
}

/** Where a published record was stored. */
export interface PublishResult {
  partition: number;
  offset: bigint;
  messageId: string;
  /** The broker's append time (millisecond precision; appendTimeUnixNanos is exact). */
  appendTime: Date;
  appendTimeUnixNanos: bigint;
  /** The record was stored before under its idempotency key: the fields are the original's. */
  duplicate: boolean;
  /** The record's place in its key's history (0, 1, 2, ... within its partition); undefined for a record without a key. */
  keyVersion?: bigint;
}

/** Options of append: a call's, and an idempotency key for the request as publish has it. */
export interface AppendOptions extends CallOptions {
  /**
   * The idempotency key of a single record, or the prefix of a batch's
   * (key + "#" + index). Records without one get a random key anyway, so
   * the client's own retries are answered with the original results.
   */
  idempotencyKey?: string;
}

/** Retention and cleanup of a topic. */
export interface RetentionOptions {
  /** Records older than this are deleted (0: no age limit). */
  maxAge?: DurationLike;
  /** Bytes kept per partition (0: no limit). */
  maxBytes?: number | bigint;
  /** Records kept per partition (0: no limit). */
  maxRecords?: number | bigint;
  /** "delete", "compact" or "compact,delete". */
  cleanup?: "delete" | "compact" | "compact,delete";
  /** How long a compacted topic keeps a key's tombstone. */
  deleteRetention?: DurationLike;
}

/** Options of createTopic. */
export interface TopicOptions extends RetentionOptions, CallOptions {
  /** Partitions (default 1). */
  partitions?: number;
  replicationFactor?: number;
  maxRecordBytes?: number;
  /** How long idempotency keys are remembered. */
  dedupeWindow?: DurationLike;
}

/** Options of resetGroup. */
export interface ResetOptions extends CallOptions {
  /** Partitions to reset (default all). */
  partitions?: number[];
  /**
   * Carry the reset out. Without it resetGroup is a dry run: it returns
   * the plan and changes nothing, as `rewind group reset` without
   * --execute and the Go client's ResetGroup with dryRun do.
   */
  execute?: boolean;
  /**
   * @deprecated Use execute. dryRun: false executes (as execute: true);
   * true is the default. Giving both, contradicting, is InvalidArgument.
   */
  dryRun?: boolean;
  /** Reset even a group that does not exist yet, creating it. */
  create?: boolean;
}

/** Where a plugin test reads its input: given records, or a range of a topic. */
export type TestSource =
  | { records: TestRecord[] }
  | { topic: string; from?: PositionLike; partitions?: number[]; limit?: number };

/** A record a plugin test runs on. */
export interface TestRecord {
  key?: Bytes;
  value?: Bytes;
  headers?: { key: string; value: Bytes }[];
  partition?: number;
  offset?: number | bigint;
  idempotencyKey?: string;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });

/** How a unary call may be repeated. */
/** The answer of one attempt (or hedged pair), with the node that gave it. */
type Outcome<T> = { ok: true; value: T; cl: Clients } | { ok: false; err: unknown; cl: Clients };

interface CallKind {
  /** Running it twice has the effect and answer of running it once. */
  again: boolean;
  /**
   * Running it twice at once has the effect of once, so an attempt that
   * waits longer than hedgeDelayMs also goes to another node (a publish
   * only when every record has an idempotency key).
   */
  hedge?: boolean;
  /** Bytes the call sends: an attempt's deadline grows by a second per 4 MiB. */
  bytes?: number;
}
const REPEATABLE: CallKind = { again: true, hedge: true };
const ONCE: CallKind = { again: false };

/**
 * Client talks to one Rewind node, or to the members of a cluster. Make
 * one with createClient (from "@rewind-io/client", or
 * "@rewind-io/client/node" in Node for HTTP/2 and gRPC). It is safe to
 * share; every method is independent.
 */
export class Client {
  readonly #factory: TransportFactory;
  readonly #nodes: string[];
  readonly #conns = new Map<string, Clients>();
  readonly #penalty = new Map<string, number>(); // url -> skipped until (ms)
  #current = 0;
  /**
   * Users, ACL rules and quotas (a server started with --auth; every call
   * needs the cluster admin right): client.auth.createUser("etl"), ...
   */
  readonly auth: Auth;
  /** The options the client was made with, defaults filled in. */
  readonly options: Required<Omit<ClientOptions, "baseUrl" | "nodes" | "transport" | "token">>;

  /** @internal use createClient. */
  constructor(nodes: string[], factory: TransportFactory, opts: ClientOptions) {
    if (nodes.length === 0) throw new TypeError("createClient: give baseUrl or nodes");
    this.#nodes = nodes;
    this.#factory = factory;
    this.options = {
      attemptTimeoutMs: opts.attemptTimeoutMs ?? 2000,
      attempts: Math.max(1, opts.attempts ?? 4),
      retryWindowMs: opts.retryWindowMs ?? 5000,
      nodePenaltyMs: opts.nodePenaltyMs ?? 5000,
      hedgeDelayMs: Math.max(0, opts.hedgeDelayMs ?? 500),
      streamOpenTimeoutMs: opts.streamOpenTimeoutMs ?? 10000,
      generateIdempotencyKeys: opts.generateIdempotencyKeys ?? false,
    };
    this.auth = new Auth((kind, o, call) => this.unary(kind, o, call));
  }

  /** The nodes the client uses, as base URLs. */
  get nodes(): readonly string[] {
    return this.#nodes;
  }

  // ---- nodes

  /** @internal the connection to url (one per node, made on first use). */
  conn(url: string): Clients {
    let c = this.#conns.get(url);
    if (!c) {
      const t = this.#factory(url);
      c = {
        url,
        topics: createConnectClient(TopicService, t),
        publish: createConnectClient(PublishService, t),
        subscribe: createConnectClient(SubscribeService, t),
        groups: createConnectClient(GroupService, t),
        plugins: createConnectClient(PluginService, t),
        cluster: createConnectClient(ClusterService, t),
        store: createConnectClient(EventStoreService, t),
        auth: createConnectClient(AuthService, t),
      };
      this.#conns.set(url, c);
    }
    return c;
  }

  /** @internal the node calls go to now: the current one unless penalised, else the next that is not, else the one free soonest. */
  pick(avoid?: Set<string>): Clients {
    const now = Date.now();
    const n = this.#nodes.length;
    let best = -1;
    for (let i = 0; i < n; i++) {
      const j = (this.#current + i) % n;
      const url = this.#nodes[j];
      if (avoid?.has(url)) continue;
      if ((this.#penalty.get(url) ?? 0) <= now) {
        this.#current = j;
        return this.conn(url);
      }
      if (best < 0 || this.#penalty.get(url)! < this.#penalty.get(this.#nodes[best])!) best = j;
    }
    if (best < 0) best = this.#current; // every node avoided: try the current one again
    this.#current = best;
    return this.conn(this.#nodes[best]);
  }

  /** @internal whether url is penalised now. */
  penalised(url: string): boolean {
    return (this.#penalty.get(url) ?? 0) > Date.now();
  }

  /** @internal penalise url: calls skip it for the penalty. */
  fail(url: string): void {
    if (!this.#nodes.includes(url)) return;
    this.#penalty.set(url, Date.now() + this.options.nodePenaltyMs);
    if (this.#nodes[this.#current] === url) this.#current = (this.#current + 1) % this.#nodes.length;
  }

  /** @internal how many nodes the client has. */
  get count(): number {
    return this.#nodes.length;
  }

  /**
   * @internal unary runs one call on the picked node, and again as its
   * kind and the retry policy allow (see the file comment).
   */
  async unary<T>(kind: CallKind, opts: CallOptions | undefined, call: (c: Clients, signal: AbortSignal) => Promise<T>): Promise<T> {
    const { signal, release } = callSignal(opts);
    try {
      return await this.#unary(kind, signal, call);
    } finally {
      release();
    }
  }

  async #unary<T>(kind: CallKind, signal: AbortSignal | undefined, call: (c: Clients, signal: AbortSignal) => Promise<T>): Promise<T> {
    const start = Date.now();
    let wait = 50;
    let to: Clients | undefined; // where a refusal sent the next attempt
    let redirects = 0;
    const tried = new Set<string>();
    let avoid = false;
    for (let attempt = 1; ; attempt++) {
      let cl = to ?? this.pick(avoid ? tried : undefined);
      to = undefined;
      const out = await this.#hedged(kind, cl, this.#bound(kind), signal, call);
      if (out.ok) return out.value;
      const err = toRewindError(out.err);
      cl = out.cl; // the node whose answer this is
      if (signal?.aborted) throw aborted(signal);
      const coord = err.coordinator;
      if (coord && redirects < 2) {
        redirects++;
        attempt--;
        to = this.conn(normalize(coord));
        continue;
      }
      const bad = badNode(err);
      if (bad) {
        tried.add(cl.url);
        const leader = err.leaderAddress;
        avoid = !leader;
        if (leader && this.penalised(normalize(leader))) {
          // This client could not reach the node named, or heard nothing
          // from it, within its penalty: most likely dead or paused, named
          // by a member whose raft has not noticed yet. The call stays on
          // the node that answered, which forwards it to the next leader
          // once it is elected.
          to = cl;
        } else {
          if (leader) to = this.conn(normalize(leader));
          this.fail(cl.url);
        }
      }
      const again = notDone(err) || (kind.again && (bad || retryable(err)));
      if (!again && bad && !kind.again) throw toRewindError(err, true);
      if (!again || !(attempt < this.options.attempts || Date.now() - start < this.options.retryWindowMs)) throw err;
      await sleep(wait, signal);
      if (signal?.aborted) throw aborted(signal);
      // Capped at 250 ms: a call refused quickly during an election
      // (about half a second with the server's failure detector) goes out
      // again within 250 ms of the new leader. As the Go client.
      wait = Math.min(2 * wait, 250);
    }
  }

  // #bound is one attempt's deadline: only calls that may run again have
  // one (a write cut off by it could not be repeated), and a large request
  // gets a second more per 4 MiB so a slow link does not cut it off while
  // it is still being sent.
  #bound(kind: CallKind): number {
    const base = this.options.attemptTimeoutMs;
    if (!kind.again || base <= 0) return 0;
    return base + Math.floor((kind.bytes ?? 0) / (4 << 20)) * 1000;
  }

  // #hedged makes one attempt of call on cl and, when the kind allows a
  // hedge and cl has not answered within hedgeDelayMs, on another node too
  // (penalising cl, so the next calls skip it). The answer is the first
  // that is a success or does not blame its node (badNode), else the
  // last, with the node that gave it; the other attempt is cancelled. A
  // refusal naming the leader is returned at once: the retry loop goes
  // there, while the other attempt may be stuck on the old leader.
  async #hedged<T>(
    kind: CallKind,
    cl: Clients,
    boundMs: number,
    signal: AbortSignal | undefined,
    call: (c: Clients, signal: AbortSignal) => Promise<T>,
  ): Promise<Outcome<T>> {
    const run = (c: Clients, s: AbortSignal | undefined): Promise<Outcome<T>> =>
      this.#attempt(c, boundMs, s, call).then(
        (value): Outcome<T> => ({ ok: true, value, cl: c }),
        (err: unknown): Outcome<T> => ({ ok: false, err, cl: c }),
      );
    const delay = this.options.hedgeDelayMs;
    if (!kind.hedge || delay <= 0 || (boundMs > 0 && delay >= boundMs) || this.#nodes.length < 2) return run(cl, signal);
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) ctrl.abort(signal.reason);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const first = run(cl, ctrl.signal);
      const late = new Promise<undefined>((res) => (timer = setTimeout(() => res(undefined), delay)));
      const early = await Promise.race([first, late]);
      if (early) return early;
      this.fail(cl.url);
      const other = this.pick(new Set([cl.url]));
      if (other.url === cl.url) return await first;
      const second = run(other, ctrl.signal);
      const tagged = [first.then((o) => ({ o, i: 0 })), second.then((o) => ({ o, i: 1 }))];
      const a = await Promise.race(tagged);
      if (!a.o.ok && !signal?.aborted) {
        const err = toRewindError(a.o.err);
        // A refusal naming the partition's leader is the answer: the retry
        // loop follows the hint rather than wait for the other attempt,
        // which may be stuck on the old leader. Unless the leader it names
        // is the node the other attempt waits on.
        const pending = a.i === 0 ? other.url : cl.url;
        const hint = err.leaderAddress;
        // Any answer of the hedge's node ends the attempt too (its retry
        // goes on elsewhere after the backoff): the first node has been
        // silent for the hedge delay, and waiting for it cost a whole
        // attempt when the other member knew no leader yet. Only a hedge
        // that could not reach its node leaves the call to the first.
        const hedgeAnswered = a.i === 1 && !unreachable(err);
        if (badNode(err) && (!hint || normalize(hint) === pending) && !hedgeAnswered) return await (a.i === 0 ? second : first);
      }
      return a.o;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      ctrl.abort(); // the attempt that lost, if it still runs
    }
  }

  async #attempt<T>(
    cl: Clients,
    boundMs: number,
    signal: AbortSignal | undefined,
    call: (c: Clients, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) ctrl.abort(signal.reason);
    let timedOut = false;
    const timer =
      boundMs > 0
        ? setTimeout(() => {
            timedOut = true;
            ctrl.abort();
          }, boundMs)
        : undefined;
    try {
      return await call(cl, ctrl.signal);
    } catch (e) {
      if (timedOut && !signal?.aborted) {
        // The attempt's deadline, not the caller's: the node did not answer in time.
        throw noAnswer("answer", cl.url, boundMs, e);
      }
      throw e;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  // ---- publish

  /**
   * publish appends records in one request and resolves once they are
   * durable, with one result per record in order. Records bound for the
   * same partition keep their order. A bad record (too large, unknown
   * partition) fails the whole request with InvalidArgument and stores
   * nothing (RewindError.recordTooLarge says which).
   *
   * When some partitions fail and others store their records, it throws a
   * PartialError with every result. A failure whose outcome is unknown is
   * retried with the same request, on another node when the node failed:
   * records with idempotency keys are never stored twice.
   */
  async publish(topic: string, records: Message | Message[], opts?: PublishOptions): Promise<PublishResult[]> {
    const list = Array.isArray(records) ? records : [records];
    const gen = opts?.generateIdempotencyKeys ?? this.options.generateIdempotencyKeys;
    const recs: PublishRecord[] = list.map((m, i) => {
      const r = publishRecord(m, i);
      if (!r.idempotencyKey && opts?.idempotencyKey) {
        r.idempotencyKey = list.length === 1 ? opts.idempotencyKey : `${opts.idempotencyKey}#${i}`;
      }
      if (!r.idempotencyKey && gen) r.idempotencyKey = generatedKey();
      return r;
    });
    // A record without an idempotency key could be stored twice by a
    // hedge: such a request waits for its node.
    const hedge = recs.every((r) => r.idempotencyKey !== "");
    const resp = await this.unary({ again: true, hedge, bytes: recordBytes(recs) }, opts, (c, signal) =>
      c.publish.publish({ topic, records: recs, partial: true }, { signal }),
    );
    const failed: PartialError["failed"] = [];
    const out = resp.results.map((r, index): PublishResult => {
      if (r.error) {
        failed.push({ index, partition: r.partition, code: r.error.code as Code, message: r.error.message, notStored: r.error.notStored });
      }
      return resultOf(r);
    });
    if (failed.length > 0) throw new PartialError(out, failed);
    return out;
  }

  // ---- event store

  /**
   * append appends messages under key (a message without a key gets it)
   * as one conditional append: all or none, and only if every condition
   * holds when the partition stores them. A refusal throws a
   * ConditionError (FailedPrecondition) and stores nothing. Without a
   * condition on key, the append expects anything of it (still all or
   * none). The last argument may be options (a signal, an idempotency key).
   *
   * The records and the keys the conditions name must share a partition:
   * one key, keys that hash alike, an explicit partition, or a topic with
   * one partition (otherwise InvalidArgument). Records without an
   * idempotency key get a random one, so a retry after a lost answer is
   * answered with the original results (duplicate: true), never stored
   * twice nor refused.
   *
   *     const acc = await client.readKey("accounts", "acc-1");
   *     await client.append("accounts", "acc-1", { type: "Deposited", value: "10" }, acc.expect());
   */
  async append(
    topic: string,
    key: Bytes,
    messages: Message | Message[],
    ...conditions: Condition[] | [...Condition[], AppendOptions]
  ): Promise<PublishResult[]> {
    const k = bytes(key);
    if (k.length === 0) throw new RewindError(new ConnectError("append needs a key", Code.InvalidArgument));
    const last = conditions[conditions.length - 1];
    const opts = last !== undefined && !("kind" in last) ? (last as AppendOptions) : undefined;
    const conds = (opts ? conditions.slice(0, -1) : conditions) as Condition[];
    const list = Array.isArray(messages) ? messages : [messages];
    const recs = list.map((m, i) => {
      const r = publishRecord(m, i);
      if (r.key.length === 0) r.key = k;
      if (!r.idempotencyKey && opts?.idempotencyKey) {
        r.idempotencyKey = list.length === 1 ? opts.idempotencyKey : `${opts.idempotencyKey}#${i}`;
      }
      if (!r.idempotencyKey) r.idempotencyKey = generatedKey();
      return r;
    });
    const req = create(PublishRequestSchema, { topic, records: recs, partial: false, ...conditionsProto(k, conds) });
    const resp = await this.unary({ again: true, hedge: true, bytes: recordBytes(recs) }, opts, (c, signal) => c.publish.publish(req, { signal }));
    return resp.results.map(resultOf);
  }

  /**
   * readKey reads one key's history (an entity's events) through the key
   * index, from the partition's leader: it includes every acknowledged
   * append. head is the key's last version; result.expect() is the
   * condition to append with.
   */
  async readKey(topic: string, key: Bytes, opts?: ReadOptions): Promise<ReadResult> {
    const req = readRequest(topic, { case: "key", value: bytes(key) }, opts);
    return readResultOf(await this.unary(REPEATABLE, opts, (c, signal) => c.store.read(req, { signal })));
  }

  /**
   * query reads the records query matches in one partition (opts.partition
   * unless the topic has one), and the position to pass to failIfMatched.
   */
  async query(topic: string, query: Query, opts?: ReadOptions): Promise<ReadResult> {
    const req = readRequest(topic, { case: "query", value: query }, opts);
    return readResultOf(await this.unary(REPEATABLE, opts, (c, signal) => c.store.read(req, { signal })));
  }

  // ---- streams

  /**
   * subscribe opens a stream on topic: replay from `from` (default
   * earliest), live, or both, up to `to` (default: follow forever), or as a
   * member of a group. Iterate it with `for await`. See Subscription.
   */
  subscribe(topic: string, opts: SubscribeOptions = {}): Subscription {
    return new Subscription(this, topic, opts);
  }

  /**
   * replay is subscribe, named for its most common use:
   * `for await (const ev of client.replay("orders", { from: "-15m", to: "end" }))`.
   */
  replay(topic: string, opts: SubscribeOptions = {}): Subscription {
    return this.subscribe(topic, opts);
  }

  // ---- topics

  /** createTopic creates a topic (AlreadyExists if it exists). */
  async createTopic(name: string, opts: TopicOptions = {}): Promise<Topic> {
    const config = {
      partitions: opts.partitions ?? 1,
      replicationFactor: opts.replicationFactor ?? 0,
      maxRecordBytes: opts.maxRecordBytes ?? 0,
      retention: retentionProto(opts),
      dedupeWindow: opts.dedupeWindow !== undefined ? durationProto(opts.dedupeWindow) : undefined,
    };
    const r = await this.unary(ONCE, opts, (c, signal) => c.topics.createTopic({ name, config }, { signal }));
    return r.topic!;
  }

  /** listTopics lists the topics. */
  async listTopics(opts?: CallOptions): Promise<Topic[]> {
    return (await this.unary(REPEATABLE, opts, (c, signal) => c.topics.listTopics({}, { signal }))).topics;
  }

  /** describeTopic returns a topic and its partitions (log start and end, bytes, append times, leader). */
  async describeTopic(name: string, opts?: CallOptions): Promise<{ topic: Topic; partitions: PartitionInfo[] }> {
    const r = await this.unary(REPEATABLE, opts, (c, signal) => c.topics.describeTopic({ name }, { signal }));
    return { topic: r.topic!, partitions: r.partitions };
  }

  /** alterTopic replaces a topic's retention and cleanup (unset fields: no limit, the default policy). */
  async alterTopic(name: string, retention: RetentionOptions, opts?: CallOptions): Promise<Topic> {
    const r = await this.unary(REPEATABLE, opts, (c, signal) =>
      c.topics.alterTopic({ name, retention: retentionProto(retention) }, { signal }),
    );
    return r.topic!;
  }

  /** deleteTopic deletes a topic and its records. */
  async deleteTopic(name: string, opts?: CallOptions): Promise<void> {
    await this.unary(ONCE, opts, (c, signal) => c.topics.deleteTopic({ name }, { signal }));
  }

  // ---- groups

  /**
   * commit commits a group's progress on topic: for each partition, the
   * next offset to read. generation is the member's (Subscription.generation);
   * a commit for a partition the member no longer owns, or from before a
   * reset, fails with FailedPrecondition.
   */
  async commit(
    group: string,
    topic: string,
    generation: bigint,
    offsets: Map<number, bigint | number> | { [partition: number]: bigint | number },
    opts?: CallOptions,
  ): Promise<void> {
    const entries = offsets instanceof Map ? [...offsets] : Object.entries(offsets).map(([p, o]) => [Number(p), o] as const);
    const req = { group, topic, generation, offsets: entries.map(([partition, offset]) => ({ partition, offset: BigInt(offset) })) };
    await this.unary(REPEATABLE, opts, (c, signal) => c.groups.commit(req, { signal }));
  }

  /** listGroups lists the groups, one row per group and topic. */
  async listGroups(opts?: CallOptions): Promise<GroupSummary[]> {
    return (await this.unary(REPEATABLE, opts, (c, signal) => c.groups.listGroups({}, { signal }))).groups;
  }

  /** describeGroup returns a group's members, assignments, commits and lag, per topic. */
  async describeGroup(group: string, opts?: CallOptions): Promise<GroupTopic[]> {
    return (await this.unary(REPEATABLE, opts, (c, signal) => c.groups.describeGroup({ group }, { signal }))).topics;
  }

  /** deleteGroup deletes a group's commits (force: even while members are connected; their streams end). */
  async deleteGroup(group: string, opts?: CallOptions & { force?: boolean }): Promise<void> {
    await this.unary(ONCE, opts, (c, signal) => c.groups.deleteGroup({ group, force: opts?.force ?? false }, { signal }));
  }

  /**
   * resetGroup plans moving a group's offsets on topic to target
   * (earliest, latest, N, @time, -duration, -N, +N, id:...) and returns
   * the plan; with { execute: true } it also carries it out (executed is
   * then true), and live members seek at once. Without execute it is a dry
   * run that changes nothing, as in the CLI and the Go client. An executed
   * reset is not sent twice by the client (a relative target would move
   * twice).
   */
  async resetGroup(group: string, topic: string, target: PositionLike, opts: ResetOptions = {}): Promise<ResetGroupResponse> {
    if (opts.execute !== undefined && opts.dryRun !== undefined && opts.execute === opts.dryRun) {
      throw new RewindError(
        new ConnectError(`resetGroup: execute ${opts.execute} and dryRun ${opts.dryRun} contradict each other (give execute alone)`, Code.InvalidArgument),
      );
    }
    const execute = opts.execute ?? opts.dryRun === false;
    const req = {
      group,
      topic,
      target: resetTargetProto(toPosition(target)),
      partitions: opts.partitions ?? [],
      dryRun: !execute,
      create: opts.create ?? false,
    };
    return this.unary(execute ? ONCE : REPEATABLE, opts, (c, signal) => c.groups.resetGroup(req, { signal }));
  }

  // ---- plugins

  /** uploadPlugin registers a WebAssembly module under name as its next version (unchanged: it was the newest already). */
  async uploadPlugin(
    name: string,
    module: Uint8Array,
    opts: CallOptions & { description?: string } = {},
  ): Promise<{ plugin: Plugin; unchanged: boolean }> {
    const r = await this.unary(ONCE, opts, (c, signal) =>
      c.plugins.uploadPlugin({ name, module, description: opts.description ?? "" }, { signal }),
    );
    return { plugin: r.plugin!, unchanged: r.unchanged };
  }

  /** listPlugins lists the registered plugins (every version), or the versions of one name. */
  async listPlugins(name = "", opts?: CallOptions): Promise<Plugin[]> {
    return (await this.unary(REPEATABLE, opts, (c, signal) => c.plugins.listPlugins({ name }, { signal }))).plugins;
  }

  /** getPlugin returns a plugin ("NAME", "NAME@VERSION", "sha256:HEX"), with its module if asked. */
  async getPlugin(ref: string, opts: CallOptions & { includeModule?: boolean } = {}): Promise<{ plugin: Plugin; module: Uint8Array }> {
    const r = await this.unary(REPEATABLE, opts, (c, signal) =>
      c.plugins.getPlugin({ plugin: ref, includeModule: opts.includeModule ?? false }, { signal }),
    );
    return { plugin: r.plugin!, module: r.module };
  }

  /** deletePlugin deletes a plugin version ("NAME@VERSION") or every version of a name, and returns what it deleted. */
  async deletePlugin(ref: string, opts?: CallOptions): Promise<Plugin[]> {
    return (await this.unary(ONCE, opts, (c, signal) => c.plugins.deletePlugin({ plugin: ref }, { signal }))).deleted;
  }

  /**
   * testPlugin runs a filter over given records or a range of a topic and
   * returns what it kept and emitted for each input. A module that fails
   * does not throw: the response's error says how (a FilterError).
   */
  async testPlugin(filter: FilterSpec, source: TestSource, opts?: CallOptions): Promise<TestPluginResponse> {
    const input =
      "records" in source
        ? {
            case: "records" as const,
            value: {
              records: source.records.map(
                (r): MessageInitShape<typeof RecordSchema> => ({
                  partition: r.partition,
                  offset: r.offset !== undefined ? BigInt(r.offset) : undefined,
                  key: bytes(r.key),
                  value: bytes(r.value),
                  headers: (r.headers ?? []).map((h) => ({ key: h.key, value: bytes(h.value) })),
                  idempotencyKey: r.idempotencyKey,
                }),
              ),
            },
          }
        : {
            case: "topic" as const,
            value: {
              topic: source.topic,
              partitions: source.partitions ?? [],
              start: source.from !== undefined ? startProto(toPosition(source.from)) : undefined,
              limit: source.limit ?? 0,
            },
          };
    return this.unary(REPEATABLE, opts, (c, signal) => c.plugins.testPlugin({ filter: filterProto(filter), input }, { signal }));
  }

  // ---- cluster

  /** clusterStatus returns the nodes, and each partition's leader, replicas and their progress, as the answering node sees them. */
  async clusterStatus(opts?: CallOptions): Promise<GetClusterStatusResponse> {
    return this.unary(REPEATABLE, opts, (c, signal) => c.cluster.getClusterStatus({}, { signal }));
  }

  /**
   * transferLeader asks the client's first node, which must lead the
   * partition, to hand leadership to node (one of its replicas). It is
   * meant for that one node: it is neither moved nor repeated.
   */
  async transferLeader(topic: string, partition: number, node: bigint | number, opts?: CallOptions): Promise<void> {
    const { signal, release } = callSignal(opts);
    try {
      await this.conn(this.#nodes[0]).cluster.transferLeader({ topic, partition, node: BigInt(node) }, { signal });
    } catch (e) {
      throw signal?.aborted ? aborted(signal) : toRewindError(e);
    } finally {
      release();
    }
  }

  /** removeNode moves every replica off node and removes it from the cluster; it resolves once nothing depends on the node. */
  async removeNode(node: bigint | number, opts?: CallOptions): Promise<{ moved: number; shrunk: number }> {
    const r = await this.unary(ONCE, opts, (c, signal) => c.cluster.removeNode({ node: BigInt(node) }, { signal }));
    return { moved: r.moved, shrunk: r.shrunk };
  }

  /** rebalance moves replicas so every member holds about as many, and returns the moves (dryRun: only plans them). */
  async rebalance(opts: CallOptions & { dryRun?: boolean } = {}): Promise<ReplicaMove[]> {
    const dryRun = opts.dryRun ?? false;
    return (await this.unary(dryRun ? REPEATABLE : ONCE, opts, (c, signal) => c.cluster.rebalance({ dryRun }, { signal }))).moves;
  }
}

function retentionProto(o: RetentionOptions): Retention | undefined {
  if (
    o.maxAge === undefined &&
    o.maxBytes === undefined &&
    o.maxRecords === undefined &&
    o.cleanup === undefined &&
    o.deleteRetention === undefined
  ) {
    return undefined;
  }
  const cleanup = {
    delete: CleanupPolicy.DELETE,
    compact: CleanupPolicy.COMPACT,
    "compact,delete": CleanupPolicy.COMPACT_DELETE,
  }[o.cleanup ?? "delete"];
  if (cleanup === undefined) {
    throw new RewindError(new ConnectError(`cleanup ${o.cleanup}: want delete, compact or compact,delete`, Code.InvalidArgument));
  }
  return create(RetentionSchema, {
    maxAge: o.maxAge !== undefined ? durationProto(o.maxAge) : undefined,
    maxBytes: BigInt(o.maxBytes ?? 0),
    maxRecords: BigInt(o.maxRecords ?? 0),
    cleanup: o.cleanup === undefined ? CleanupPolicy.UNSPECIFIED : cleanup,
    deleteRetention: o.deleteRetention !== undefined ? durationProto(o.deleteRetention) : undefined,
  });
}

// The event times a record can carry: an int64 of Unix nanoseconds.
const MAX_EVENT_NS = (1n << 63n) - 1n;

function publishRecord(m: Message, i: number): PublishRecord {
  if (typeof m === "string" || m instanceof Uint8Array) {
    return create(PublishRecordSchema, { value: bytes(m) });
  }
  const headers = Array.isArray(m.headers)
    ? m.headers.map((h) => ({ key: h.key, value: bytes(h.value) }))
    : Object.entries(m.headers ?? {}).map(([key, value]) => ({ key, value: bytes(value) }));
  if (m.type !== undefined && m.type !== "") headers.push({ key: TYPE_HEADER, value: bytes(m.type) });
  for (const t of m.tags ?? []) headers.push({ key: TAG_HEADER, value: bytes(t) });
  let eventTimeUnixNanos = 0n;
  if (m.eventTime !== undefined) {
    const ms = m.eventTime.getTime();
    if (Number.isNaN(ms)) throw new RewindError(new ConnectError(`record ${i}: invalid event time`, Code.InvalidArgument));
    eventTimeUnixNanos = BigInt(ms) * 1_000_000n;
    if (eventTimeUnixNanos > MAX_EVENT_NS || eventTimeUnixNanos < -MAX_EVENT_NS - 1n) {
      throw new RewindError(
        new ConnectError(`record ${i}: event time ${m.eventTime.toISOString()} is outside the Unix nanoseconds of an int64`, Code.InvalidArgument),
      );
    }
  }
  return create(PublishRecordSchema, {
    key: bytes(m.key),
    value: bytes(m.value),
    headers,
    idempotencyKey: m.idempotencyKey ?? "",
    eventTimeUnixNanos,
    partition: m.partition,
  });
}

/** recordBytes is about the bytes records take on the wire (for an attempt's deadline). */
function recordBytes(recs: PublishRecord[]): number {
  let size = 0;
  for (const r of recs) size += r.key.length + r.value.length + r.headers.reduce((n, h) => n + h.key.length + h.value.length, 0);
  return size;
}

function resultOf(r: PublishResultProto): PublishResult {
  return {
    partition: r.partition,
    offset: r.offset,
    messageId: r.messageId,
    appendTime: new Date(Number(r.appendTimeUnixNanos / 1_000_000n)),
    appendTimeUnixNanos: r.appendTimeUnixNanos,
    duplicate: r.duplicate,
    keyVersion: r.keyVersion,
  };
}

/** generatedKey returns a random idempotency key (128 bits): "gen-" and 22 base64url characters. */
function generatedKey(): string {
  const b = new Uint8Array(16);
  globalThis.crypto.getRandomValues(b);
  let s = "";
  for (const x of b) s += String.fromCharCode(x);
  return "gen-" + btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * @internal makeClient is createClient with the environment's transports
 * (index.ts: fetch; node.ts: HTTP/2).
 */
export function makeClient(opts: ClientOptions, defaults: (protocol: Protocol, baseUrl: string, interceptors?: Interceptor[]) => Transport): Client {
  const list =
    opts.nodes !== undefined
      ? (Array.isArray(opts.nodes) ? opts.nodes : opts.nodes.split(",")).map((s) => s.trim()).filter((s) => s !== "")
      : opts.baseUrl !== undefined
        ? opts.baseUrl.split(",").map((s) => s.trim()).filter((s) => s !== "")
        : [];
  const nodes = [...new Set(list.map(normalize))];
  const t = opts.transport ?? "connect";
  let factory: TransportFactory;
  const interceptors: Interceptor[] = [];
  if (opts.token) {
    const bearer = "Bearer " + opts.token;
    interceptors.push((next) => (req) => {
      req.header.set("Authorization", bearer);
      return next(req);
    });
  }
  if (typeof t === "string") factory = (url) => defaults(t, url, interceptors);
  else if (typeof t === "function") factory = t;
  else {
    const one = t;
    factory = () => one;
    if (nodes.length === 0) nodes.push("transport");
    nodes.length = 1;
  }
  return new Client(nodes, factory, opts);
}
