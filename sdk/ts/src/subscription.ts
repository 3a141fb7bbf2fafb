// Streams. A Subscription is one logical stream the caller iterates with
// `for await`; underneath it is one server stream at a time. When a
// stream that started breaks (its node stops, restarts, or becomes
// unavailable), the subscription says so with a "disconnected" event, and
// opens a new stream — on the next node when given several — from the last
// resume token (a group member joins its group again), so nothing is
// skipped and nothing delivered twice; a "reconnected" event says it goes
// on. The new stream's "started" event is not delivered: the caller had
// one. After the reconnect window (60 s) without success the iteration
// throws a ReconnectError.
//
// One iteration per Subscription: breaking out of the loop (or close())
// ends the stream. To continue later, open a new one from resumeToken.

import { create } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import {
  ReadFrom,
  StartPositionSchema,
  SubscribeRequestSchema,
  type PartitionPosition as PartitionPositionProto,
  type SubscribeRequest,
  type SubscribeResponse,
} from "./gen/rewind/v1/subscribe_pb.js";
import { Code, ConnectError, ReconnectError, RewindError, aborted, badNode, noAnswer, toRewindError } from "./errors.js";
import { startProto, stopProto, toPosition, type PositionLike } from "./position.js";
import { bytes, filterProto, normalize, recordOf, type Bytes, type CallOptions, type Clients, type FilterSpec, type RewindRecord } from "./wire.js";

/**
 * @internal What a Subscription uses of the Client that opened it (Client
 * implements it): its nodes and their connections, the stream-open bound,
 * and commits. Declared here so that this module does not import
 * client.ts, which imports it.
 */
export interface StreamHost {
  readonly options: { readonly streamOpenTimeoutMs: number };
  /** How many nodes the client knows. */
  readonly count: number;
  /** The connections of the node the next call goes to. */
  pick(avoid?: Set<string>): Clients;
  /** Penalises the node at url (it failed). */
  fail(url: string): void;
  /** The connections of the node at url. */
  conn(url: string): Clients;
  commit(
    group: string,
    topic: string,
    generation: bigint,
    offsets: Map<number, bigint | number> | { [partition: number]: bigint | number },
    opts?: CallOptions,
  ): Promise<void>;
}

/** Options of subscribe and replay. */
export interface SubscribeOptions {
  /**
   * Where each partition starts (default earliest); CLI syntax, a
   * Position, a Date or an offset. With key, also { keyVersion: n }: the
   * key's record of version n (or, when the key has no such version yet,
   * the next record of the key appended).
   */
  from?: PositionLike | { keyVersion: number | bigint };
  /** Where the stream stops (default: follow live records forever): end, N, @time, -duration, id:... */
  to?: PositionLike;
  /** Partitions to read (default all; with key, the key's). */
  partitions?: number[];
  /**
   * Only the records of this key (an entity's stream), read through the
   * key index. Offsets, positions and resume tokens stay the partition's.
   * Not with group.
   */
  key?: Bytes;
  /** Only the records whose key, value, or a header's key or value contains these bytes (case-sensitive, at most 1024 bytes), matched by the server. */
  contains?: Bytes;
  /** A filter or transform run beside each partition reader: a plugin name ("NAME", "NAME@VERSION", "sha256:HEX") or a FilterSpec. */
  filter?: string | FilterSpec;
  /** Join this subscriber group: the server assigns this member a share of the partitions (from then applies where no commit exists). */
  group?: string;
  /** Who this member is in describeGroup. */
  clientName?: string;
  /**
   * Commit a group member's progress for it: the records of an event are
   * due once the loop asks for the next event (or breaks out, or calls
   * close()), and due offsets are committed at most every intervalMs (true:
   * at once) and when the stream ends. At-least-once.
   */
  autoCommit?: boolean | { intervalMs: number };
  /** Start at the log start instead of failing with OutOfRange when retention removed the start. */
  clampStart?: boolean;
  /** Which replica serves the records: "leader" or "local" (fetch from follower); default the server's. */
  readFrom?: "leader" | "local";
  /** Upper bound on records per records event (default the server's, 4096). */
  maxRecordsPerEvent?: number;
  /** How often a progress event comes, in ms (default 1000, at least 50). */
  progressIntervalMs?: number;
  /** How long a broken stream tries to go on, in ms (default 60000; 0: the iteration throws at once). */
  reconnectWindowMs?: number;
  /**
   * Ends the stream: the iteration throws a Canceled RewindError whose
   * cause is signal.reason (DeadlineExceeded for a TimeoutError reason,
   * as AbortSignal.timeout(ms) gives).
   */
  signal?: AbortSignal;
}

/** Where a stream stands in one partition. */
export interface PartitionPosition {
  partition: number;
  /** The next offset the stream will look at. */
  nextOffset: bigint;
  /** The partition's end when the event was made (endOffset - nextOffset is the lag). */
  endOffset: bigint;
  logStartOffset: bigint;
  /** The requested start was removed by retention; the stream starts at the log start. */
  clamped: boolean;
}

/** An event of a stream, told apart by kind. */
export type ReplayEvent =
  | { kind: "started"; topicId: bigint; partitions: PartitionPosition[]; resumeToken: string; filterModule: string }
  | { kind: "records"; partition: number; records: RewindRecord[]; resumeToken: string; filterModule: string }
  | { kind: "progress"; partitions: PartitionPosition[]; resumeToken: string; filterModule: string }
  | { kind: "caughtUp"; partition: number; nextOffset: bigint; laggingPartitions: number }
  | { kind: "end"; partitions: PartitionPosition[]; resumeToken: string; filterModule: string }
  | { kind: "assigned"; memberId: string; generation: bigint; epoch: bigint; partitions: PartitionPosition[]; revoked: number[] }
  | { kind: "replayStarted"; epoch: bigint; partition: number; fromOffset: bigint; generation: bigint }
  | { kind: "disconnected"; error: RewindError; retryForMs: number }
  | { kind: "reconnected"; attempts: number; downMs: number; partitions: PartitionPosition[]; resumeToken: string };

const RECONNECT_PAUSE_MS = 100;
const MAX_RECONNECT_PAUSE_MS = 2000;
const COMMIT_TIMEOUT_MS = 10000;

/**
 * Subscription is an open stream: iterate it once with `for await` for
 * every event, or with records() for the records alone. It is not safe to
 * iterate twice.
 */
export class Subscription implements AsyncIterable<ReplayEvent> {
  readonly #client: StreamHost;
  readonly #topic: string;
  readonly #opts: SubscribeOptions;
  #req: SubscribeRequest | undefined;
  #ctrl: AbortController | undefined;
  #closed = false;
  #iterated = false;
  #token = "";
  #started = false;
  #resumes = 0;
  // Group members.
  #memberId = "";
  #generation = 0n;
  #owned = new Set<number>();
  #due = new Map<number, bigint>();
  #delivered = new Map<number, bigint>();
  #skip = new Map<number, bigint>();
  #lastCommit = 0;
  #commitErr: RewindError | undefined;
  // The event handed to the caller whose records are not accounted yet, and
  // how many of them were handed (-1: all).
  #pending: Extract<ReplayEvent, { kind: "records" }> | undefined;
  #handed = -1;

  /** @internal use Client.subscribe or Client.replay. */
  constructor(client: StreamHost, topic: string, opts: SubscribeOptions) {
    this.#client = client;
    this.#topic = topic;
    this.#opts = opts;
  }

  /** A token that continues right after the last event delivered: pass it as from: "token:" + it. */
  get resumeToken(): string {
    return this.#token;
  }

  /** How often the stream was reopened after it broke. */
  get resumes(): number {
    return this.#resumes;
  }

  /** The id the server gave this group member. */
  get memberId(): string {
    return this.#memberId;
  }

  /** The generation of this group member's current assignment (commits use it). */
  get generation(): bigint {
    return this.#generation;
  }

  /** The last automatic commit's error, undefined once one succeeded. */
  get commitError(): RewindError | undefined {
    return this.#commitErr;
  }

  /** close ends the stream: the iteration ends (a group member with autoCommit commits first). */
  close(): void {
    this.#closed = true;
    this.#ctrl?.abort();
  }

  /**
   * commit commits this group member's progress: for each partition, the
   * next offset to read, with the current generation.
   */
  async commit(offsets: Map<number, bigint | number> | { [partition: number]: bigint | number }): Promise<void> {
    if (!this.#opts.group) throw new RewindError(new ConnectError("commit needs a group subscription", Code.FailedPrecondition));
    await this.#client.commit(this.#opts.group, this.#topic, this.#generation, offsets);
  }

  /** commitRecords commits the offsets after records (the last of each partition). */
  async commitRecords(...records: RewindRecord[]): Promise<void> {
    const offsets = new Map<number, bigint>();
    for (const r of records) {
      if (r.offset + 1n > (offsets.get(r.partition) ?? 0n)) offsets.set(r.partition, r.offset + 1n);
    }
    await this.commit(offsets);
  }

  /** records iterates the stream's records alone (breaking out ends the stream). */
  async *records(): AsyncGenerator<RewindRecord, void, undefined> {
    for await (const ev of this) {
      if (ev.kind !== "records") continue;
      for (let i = 0; i < ev.records.length; i++) {
        this.#handed = i + 1;
        yield ev.records[i];
      }
    }
  }

  [Symbol.asyncIterator](): AsyncGenerator<ReplayEvent, void, undefined> {
    if (this.#iterated) throw new TypeError("a Subscription is iterated once; open another from its resumeToken");
    this.#iterated = true;
    return this.#run();
  }

  #request(): SubscribeRequest {
    if (this.#req) return this.#req;
    const o = this.#opts;
    if (o.group !== undefined && o.group === "") {
      throw new RewindError(new ConnectError("group needs a name (an empty one was given)", Code.InvalidArgument));
    }
    let start, stop;
    const key = bytes(o.key);
    try {
      if (o.from !== undefined && typeof o.from === "object" && "keyVersion" in o.from) {
        if (key.length === 0) throw new Error("a start at a key version needs a key");
        const v = BigInt(o.from.keyVersion);
        if (v < 0n || v >= 1n << 64n) throw new Error(`key version ${v} is not an unsigned 64-bit integer`);
        start = create(StartPositionSchema, { position: { case: "keyVersion", value: v } });
      } else {
        start = o.from !== undefined ? startProto(toPosition(o.from)) : undefined;
      }
      // A relative stop (-15m) is resolved once: a resumed stream stops where the first would have.
      stop = o.to !== undefined ? stopProto(toPosition(o.to)) : undefined;
    } catch (e) {
      throw new RewindError(new ConnectError((e as Error).message, Code.InvalidArgument));
    }
    const filter = o.filter === undefined ? undefined : filterProto(typeof o.filter === "string" ? { plugin: o.filter } : o.filter);
    this.#req = create(SubscribeRequestSchema, {
      topic: this.#topic,
      partitions: o.partitions ?? [],
      start,
      stop,
      maxRecordsPerEvent: o.maxRecordsPerEvent ?? 0,
      progressInterval:
        o.progressIntervalMs !== undefined
          ? create(DurationSchema, {
              seconds: BigInt(Math.floor(o.progressIntervalMs / 1000)),
              nanos: (o.progressIntervalMs % 1000) * 1e6,
            })
          : undefined,
      group: o.group ?? "",
      clientName: o.clientName ?? "",
      clampStart: o.clampStart ?? false,
      filter,
      readFrom: o.readFrom === "leader" ? ReadFrom.LEADER : o.readFrom === "local" ? ReadFrom.LOCAL_REPLICA : ReadFrom.UNSPECIFIED,
      key,
      contains: bytes(o.contains),
    });
    return this.#req;
  }

  async *#run(): AsyncGenerator<ReplayEvent, void, undefined> {
    const req = this.#request();
    const window = this.#opts.reconnectWindowMs ?? 60000;
    const signal = this.#opts.signal;
    let brokeAt = 0; // when the stream broke; 0: it is not broken
    let attempts = 0;
    let tries = 0; // nodes tried to open the first stream
    let pause = RECONNECT_PAUSE_MS;
    let node = this.#client.pick();
    try {
      for (;;) {
        if (signal?.aborted) throw aborted(signal);
        if (this.#closed) return;
        try {
          let first = true;
          for await (const msg of this.#open(node, req)) {
            const ev = this.#apply(msg);
            if (first) {
              first = false;
              if (brokeAt !== 0) {
                // Reconnected: the new stream's Started is not delivered.
                const down = Date.now() - brokeAt;
                brokeAt = 0;
                pause = RECONNECT_PAUSE_MS;
                this.#resumes++;
                const partitions = ev?.kind === "started" ? ev.partitions : [];
                yield { kind: "reconnected", attempts, downMs: down, partitions, resumeToken: this.#token };
                attempts = 0;
                if (ev?.kind === "started") continue;
              }
            }
            if (!ev) continue;
            if (ev.kind === "records") {
              this.#pending = ev;
              this.#handed = -1;
            }
            yield ev;
            await this.#settle();
            if (ev.kind === "end") return;
          }
          if (this.#closed) return;
          throw new RewindError(new ConnectError("stream closed by the server without an end event", Code.Unavailable));
        } catch (e) {
          if (this.#closed) return;
          const err = toRewindError(e);
          if (signal?.aborted) throw aborted(signal);
          if (!this.#started) {
            // Not started yet: any node serves any stream; move on.
            if (badNode(err) && ++tries < this.#client.count) {
              this.#client.fail(node.url);
              node = this.#client.pick();
              continue;
            }
            throw err;
          }
          const resumable = this.#opts.group ? true : this.#token !== "";
          if (window <= 0 || !resumable || !badNode(err)) {
            if (brokeAt !== 0) throw new ReconnectError(err, window, attempts);
            throw err;
          }
          if (brokeAt === 0) {
            brokeAt = Date.now();
            yield { kind: "disconnected", error: err, retryForMs: window };
          }
          attempts++;
          if (Date.now() - brokeAt >= window) throw new ReconnectError(err, window, attempts);
          await new Promise((r) => setTimeout(r, pause));
          pause = Math.min(2 * pause, MAX_RECONNECT_PAUSE_MS);
          this.#client.fail(node.url);
          node = this.#client.pick();
          this.#prepareResume(req);
        }
      }
    } finally {
      this.#ctrl?.abort();
      this.#settleSync();
      if (this.#opts.autoCommit && this.#due.size > 0) await this.#commitDue();
    }
  }

  // #open opens a stream on node (following a refusal that names the
  // groups' coordinator), bounded by the open timeout until its first
  // event.
  async *#open(node: Clients, req: SubscribeRequest): AsyncGenerator<SubscribeResponse> {
    let cur = node;
    for (let redirects = 0; ; redirects++) {
      const ctrl = new AbortController();
      this.#ctrl = ctrl;
      if (this.#closed) ctrl.abort();
      const onAbort = () => ctrl.abort();
      this.#opts.signal?.addEventListener("abort", onAbort, { once: true });
      const openMs = this.#client.options.streamOpenTimeoutMs;
      let timedOut = false;
      let timer = openMs > 0 ? setTimeout(() => ((timedOut = true), ctrl.abort()), openMs) : undefined;
      let got = false;
      try {
        for await (const msg of cur.subscribe.subscribe(req, { signal: ctrl.signal })) {
          if (!got) {
            got = true;
            clearTimeout(timer);
            timer = undefined;
          }
          yield msg;
        }
        return;
      } catch (e) {
        if (timedOut && !got) {
          throw noAnswer("first event", cur.url, openMs, e);
        }
        const err = toRewindError(e);
        const coord = err.coordinator;
        if (!got && coord && redirects < 2) {
          cur = this.#client.conn(normalize(coord));
          continue;
        }
        throw err;
      } finally {
        clearTimeout(timer);
        this.#opts.signal?.removeEventListener("abort", onAbort);
      }
    }
  }

  // #prepareResume makes req continue where the stream stood: from the
  // resume token, or for a group member by joining again and skipping
  // what it delivered before.
  #prepareResume(req: SubscribeRequest): void {
    if (this.#opts.group) {
      this.#skip = new Map(this.#delivered);
      return;
    }
    req.start = startProto({ kind: "resumeToken", token: this.#token });
  }

  // #apply updates the subscription with a received event and returns the
  // event to deliver (undefined: none).
  #apply(m: SubscribeResponse): ReplayEvent | undefined {
    const e = m.event;
    switch (e.case) {
      case "started":
        this.#token = e.value.resumeToken;
        this.#started = true;
        return { kind: "started", topicId: e.value.topicId, partitions: positions(e.value.partitions), resumeToken: e.value.resumeToken, filterModule: e.value.filterModule };
      case "records": {
        this.#token = e.value.resumeToken;
        let records = e.value.records.map(recordOf);
        const from = this.#skip.get(e.value.partition);
        if (from !== undefined) {
          records = records.filter((r) => r.offset >= from);
          if (records.length === 0) return undefined;
          this.#skip.delete(e.value.partition);
        }
        return { kind: "records", partition: e.value.partition, records, resumeToken: e.value.resumeToken, filterModule: e.value.filterModule };
      }
      case "progress":
        this.#token = e.value.resumeToken;
        return { kind: "progress", partitions: positions(e.value.partitions), resumeToken: e.value.resumeToken, filterModule: e.value.filterModule };
      case "caughtUp":
        return { kind: "caughtUp", partition: e.value.partition, nextOffset: e.value.nextOffset, laggingPartitions: e.value.laggingPartitions };
      case "end":
        this.#token = e.value.resumeToken;
        return { kind: "end", partitions: positions(e.value.partitions), resumeToken: e.value.resumeToken, filterModule: e.value.filterModule };
      case "assignment": {
        const a = e.value;
        this.#memberId = a.memberId;
        this.#generation = a.generation;
        this.#owned = new Set(a.partitions.map((p) => p.partition));
        for (const p of [...this.#due.keys()]) if (!this.#owned.has(p)) this.#due.delete(p);
        for (const p of [...this.#delivered.keys()]) if (!this.#owned.has(p)) this.#delivered.delete(p);
        return { kind: "assigned", memberId: a.memberId, generation: a.generation, epoch: a.epoch, partitions: positions(a.partitions), revoked: a.revoked };
      }
      case "replayStarted": {
        const r = e.value;
        // Progress from before a reset must not undo it.
        this.#due.delete(r.partition);
        this.#delivered.delete(r.partition);
        this.#skip.delete(r.partition);
        return { kind: "replayStarted", epoch: r.epoch, partition: r.partition, fromOffset: r.fromOffset, generation: r.generation };
      }
    }
    return undefined; // an event of a newer server: ignored
  }

  // #settleSync accounts the records of the event handed to the caller: a
  // group member delivered them and, with autoCommit, they are due.
  #settleSync(): void {
    const ev = this.#pending;
    this.#pending = undefined;
    if (!ev || !this.#opts.group || !this.#owned.has(ev.partition)) return;
    const n = this.#handed >= 0 ? this.#handed : ev.records.length;
    this.#handed = -1;
    if (n === 0) return;
    const next = ev.records[n - 1].offset + 1n;
    this.#delivered.set(ev.partition, next);
    if (this.#opts.autoCommit) this.#due.set(ev.partition, next);
  }

  async #settle(): Promise<void> {
    this.#settleSync();
    const ac = this.#opts.autoCommit;
    if (!ac || this.#due.size === 0) return;
    const every = typeof ac === "object" ? ac.intervalMs : 0;
    if (Date.now() - this.#lastCommit >= every) await this.#commitDue();
  }

  async #commitDue(): Promise<void> {
    try {
      await this.#client.commit(this.#opts.group!, this.#topic, this.#generation, this.#due, { timeoutMs: COMMIT_TIMEOUT_MS });
      this.#commitErr = undefined;
      this.#due.clear();
    } catch (e) {
      this.#commitErr = toRewindError(e);
      // A fenced commit never succeeds (the partition moved, or a reset
      // happened): drop it; the other partitions of the request committed.
      if (this.#commitErr.code === Code.FailedPrecondition) this.#due.clear();
    } finally {
      this.#lastCommit = Date.now();
    }
  }
}

function positions(ps: PartitionPositionProto[]): PartitionPosition[] {
  return ps.map((p) => ({
    partition: p.partition,
    nextOffset: p.nextOffset,
    endOffset: p.endOffset,
    logStartOffset: p.logStartOffset,
    clamped: p.clamped,
  }));
}
