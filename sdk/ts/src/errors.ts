// Errors: every call fails with a RewindError, a ConnectError (so code
// checks written for Connect keep working) that carries the server's error
// details decoded, and the hints the server sends in its metadata.

import { Code, ConnectError } from "@connectrpc/connect";
import {
  ConditionFailedSchema,
  FilterErrorSchema,
  IdempotencyConflictSchema,
  OffsetRangeSchema,
  RecordTooLargeSchema,
  type ConditionFailed,
  type FilterError,
  type IdempotencyConflict,
  type OffsetRange,
  type RecordTooLarge,
} from "./gen/rewind/v1/errors_pb.js";
import { Expect } from "./gen/rewind/v1/publish_pb.js";

export { Code, ConnectError };

/**
 * RewindError is the error of every call and stream of the client. It is
 * a ConnectError (code, rawMessage, metadata, details, cause) with the
 * details Rewind attaches decoded:
 *
 * - offsetRange: an OutOfRange start or stop (the partition's stored range);
 * - recordTooLarge: an InvalidArgument publish of an oversized record;
 * - idempotencyConflict: a FailedPrecondition publish that reused a key;
 * - filterError: a filtered stream or plugin test that failed (Aborted or
 *   ResourceExhausted), with a resume token to continue from;
 * - conditionFailed: a FailedPrecondition conditional append (the error is
 *   then a ConditionError, which reads it).
 *
 * outcomeUnknown is set on a call that is not repeated by itself (create,
 * delete, upload, an executed reset) whose node failed while it was out:
 * it may have taken effect; check before trying again.
 */
export class RewindError extends ConnectError {
  // The name stays "ConnectError": Connect recognises its errors by name
  // (ConnectError[Symbol.hasInstance]), and a RewindError must stay one.

  /** x instanceof RewindError is the ordinary prototype check (not ConnectError's, which any ConnectError passes). */
  static override [Symbol.hasInstance](v: unknown): boolean {
    return Function.prototype[Symbol.hasInstance].call(this, v);
  }

  /** The OffsetRange detail of an OutOfRange error. */
  readonly offsetRange?: OffsetRange;
  /** The RecordTooLarge detail of a refused publish. */
  readonly recordTooLarge?: RecordTooLarge;
  /** The IdempotencyConflict detail of a refused publish. */
  readonly idempotencyConflict?: IdempotencyConflict;
  /** The FilterError detail of a failed filter. */
  readonly filterError?: FilterError;
  /** The ConditionFailed detail of a refused conditional append (see ConditionError). */
  readonly conditionFailed?: ConditionFailed;
  /** The call may have taken effect before its node failed (see above). */
  readonly outcomeUnknown: boolean;

  constructor(err: ConnectError, outcomeUnknown = false) {
    super(err.rawMessage, err.code, err.metadata, undefined, err.cause ?? err);
    // The incoming details stay as the server sent them (findDetails
    // decodes them again if asked).
    this.details = err.details;
    this.outcomeUnknown = outcomeUnknown;
    this.offsetRange = err.findDetails(OffsetRangeSchema)[0];
    this.recordTooLarge = err.findDetails(RecordTooLargeSchema)[0];
    this.idempotencyConflict = err.findDetails(IdempotencyConflictSchema)[0];
    this.filterError = err.findDetails(FilterErrorSchema)[0];
    this.conditionFailed = err.findDetails(ConditionFailedSchema)[0];
    if (outcomeUnknown) {
      this.message += " (the call may have taken effect before its node failed: check before trying again)";
    }
  }

  /** The id of the partition leader a refusal named (metadata Rewind-Leader), or undefined. */
  get leader(): bigint | undefined {
    const v = this.metadata.get("Rewind-Leader");
    return v ? BigInt(v) : undefined;
  }

  /** The address of the partition leader a refusal named (Rewind-Leader-Address), or undefined. */
  get leaderAddress(): string | undefined {
    return this.metadata.get("Rewind-Leader-Address") ?? undefined;
  }

  /** The node a group request was refused for in favour of (Rewind-Coordinator), or undefined. */
  get coordinator(): string | undefined {
    return this.metadata.get("Rewind-Coordinator") ?? undefined;
  }

  /** The node said it stored nothing (Unavailable with Rewind-Not-Stored): sending again is safe. */
  get notStored(): boolean {
    return this.code === Code.Unavailable && !!this.metadata.get("Rewind-Not-Stored");
  }
}

/**
 * ConditionError is a conditional append (Client.append) refused: nothing
 * of it was stored. It is the RewindError (FailedPrecondition) of the
 * refusal, with its ConditionFailed detail read: either a key expectation
 * failed (matched false: key, expected, expectedVersion, actualVersion), or
 * a record matching a failIfMatched query was appended after its position
 * (matched true: matchedOffset).
 */
export class ConditionError extends RewindError {
  /** The partition that refused the append. */
  readonly partition: number;
  /** A record matching a failIfMatched query came after its position. */
  readonly matched: boolean;
  /** With matched: the offset of that record. */
  readonly matchedOffset?: bigint;
  /** With matched: the query of the condition that failed (a Query of eventstore.ts). */
  readonly query?: { types: string[]; tags: string[] }[];
  /** With matched: the position of the condition that failed (undefined: no matching record could exist). */
  readonly after?: bigint;
  /** Without matched: the key whose expectation failed. */
  readonly key?: Uint8Array;
  /** Without matched: what was expected of the key. */
  readonly expected?: "any" | "none" | "exists" | "version";
  /** With expected "version": the version expected. */
  readonly expectedVersion?: bigint;
  /** Without matched: the key's actual last version (undefined: the key has no record). */
  readonly actualVersion?: bigint;

  constructor(err: ConnectError, outcomeUnknown = false) {
    super(err, outcomeUnknown);
    const c = this.conditionFailed;
    this.partition = c?.partition ?? 0;
    this.matched = c?.query !== undefined;
    if (!c) return;
    if (this.matched) {
      this.matchedOffset = c.matchingOffset;
      this.query = c.query?.items.map((it) => ({ types: [...it.types], tags: [...it.tags] }));
      this.after = c.after;
      return;
    }
    this.key = c.key;
    this.expected = EXPECTED[c.expected] ?? "any";
    if (this.expected === "version") this.expectedVersion = c.expectedVersion;
    this.actualVersion = c.actualVersion;
  }

  /** What was expected and what the log holds, in one line (as the Go client's Summary). */
  get summary(): string {
    if (this.matched) return `a matching record was appended at offset ${this.matchedOffset}`;
    const key = new TextDecoder().decode(this.key);
    const want = this.expected === "version" ? String(this.expectedVersion) : this.expected;
    return `key ${JSON.stringify(key)}: expected ${want}, actual ${this.actualVersion ?? "none"}`;
  }
}

const EXPECTED: { [e: number]: ConditionError["expected"] } = {
  [Expect.ANY_UNSPECIFIED]: "any",
  [Expect.NONE]: "none",
  [Expect.EXISTS]: "exists",
  [Expect.VERSION]: "version",
};

/**
 * toRewindError turns anything thrown by a call into a RewindError (a
 * ConditionError when it carries a ConditionFailed detail). A connection
 * that could not be made or broke becomes Unavailable, as in connect-go,
 * whatever code the transport gave it (see broken).
 */
export function toRewindError(err: unknown, outcomeUnknown = false): RewindError {
  if (err instanceof RewindError && err.outcomeUnknown === outcomeUnknown) return err;
  let ce = ConnectError.from(err);
  if (broken(ce)) ce = new ConnectError(ce.rawMessage, Code.Unavailable, ce.metadata, undefined, ce);
  if (ce.code === Code.FailedPrecondition && ce.findDetails(ConditionFailedSchema).length > 0) {
    return new ConditionError(ce, outcomeUnknown);
  }
  return new RewindError(ce, outcomeUnknown);
}

/**
 * aborted is the error of a call or stream whose caller's signal aborted
 * it: DeadlineExceeded when the reason is a TimeoutError (as
 * AbortSignal.timeout and the timeoutMs option give), Canceled otherwise.
 * Its cause is signal.reason, whatever the caller aborted with, so
 * `controller.abort(myReason)` can be told apart from other failures.
 */
export function aborted(signal: AbortSignal): RewindError {
  const reason: unknown = signal.reason;
  const timeout = (reason as { name?: unknown } | undefined)?.name === "TimeoutError";
  const why = reason instanceof Error ? reason.message : reason === undefined ? "" : String(reason);
  const msg = (timeout ? "the call's deadline passed" : "the call was aborted") + (why ? `: ${why}` : "");
  return new RewindError(new ConnectError(msg, timeout ? Code.DeadlineExceeded : Code.Canceled, undefined, undefined, reason));
}

/**
 * callSignal is the signal a call runs under: opts.signal, and with
 * opts.timeoutMs a deadline that aborts it with a TimeoutError. release
 * clears the deadline's timer; call it when the call ends.
 */
export function callSignal(opts: { signal?: AbortSignal; timeoutMs?: number } | undefined): { signal?: AbortSignal; release(): void } {
  const ms = opts?.timeoutMs ?? 0;
  const parent = opts?.signal;
  if (!(ms > 0)) return { signal: parent, release() {} };
  const ctrl = new AbortController();
  const onAbort = () => ctrl.abort(parent?.reason);
  if (parent?.aborted) ctrl.abort(parent.reason);
  else parent?.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(() => ctrl.abort(new DOMException(`no answer within timeoutMs (${ms} ms)`, "TimeoutError")), ms);
  return {
    signal: ctrl.signal,
    release() {
      clearTimeout(timer);
      parent?.removeEventListener("abort", onAbort);
    },
  };
}

/**
 * PartialError is thrown by a publish when some partitions stored their
 * records and others failed: results holds every record's result (those
 * in failed are not acknowledged).
 */
export class PartialError extends Error {
  override name = "PartialError";
  constructor(
    /** One result per record, in order; failed records have only a partition. */
    readonly results: import("./client.js").PublishResult[],
    /** The records that were not acknowledged. */
    readonly failed: { index: number; partition: number; code: Code; message: string; notStored: boolean }[],
  ) {
    super(`${failed.length} of ${results.length} records were not acknowledged: ${failed[0]?.message ?? ""}`);
  }
}

/**
 * ReconnectError ends a stream that broke and could not go on within its
 * reconnect window; cause is the last attempt's error.
 */
export class ReconnectError extends RewindError {
  constructor(
    last: RewindError,
    /** The window, in milliseconds. */
    readonly windowMs: number,
    /** Attempts made. */
    readonly attempts: number,
  ) {
    super(last);
    this.message = `the stream broke and could not go on within ${windowMs} ms (${attempts} attempts; last: ${last.message})`;
  }
}

// Messages of a connection that broke or could not be made, as the Node
// and browser transports word them (the code alone does not tell: a broken
// HTTP/2 stream is Aborted or Internal, a failed fetch Unknown).
const NETWORK =
  /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|socket hang up|other side closed|fetch failed|Failed to fetch|NetworkError|network error|Load failed|terminated|premature close|ERR_STREAM|ERR_HTTP2|http\/2 stream closed|GOAWAY|session (?:closed|destroyed)|missing (?:EndStreamResponse|trailer)|unexpected end|stream closed by the server/i;

/** broken reports whether err means the connection could not be made or broke, rather than an answer from the node. */
export function broken(err: ConnectError): boolean {
  if (err.code === Code.Unavailable) return false; // an answer, or classified already
  if (err.details.length > 0) return false; // the server's own error
  if (![Code.Unknown, Code.Internal, Code.Aborted, Code.Canceled].includes(err.code)) return false;
  return causes(err).some(
    (e) => e instanceof Error && (NETWORK.test(e.message) || NETWORK.test(String((e as { code?: unknown }).code ?? ""))),
  );
}

/** unreachable reports whether err's node could not be reached or its connection broke (a system error such as ECONNREFUSED in its causes), rather than an answer from the node. */
export function unreachable(err: unknown): boolean {
  return causes(err).some((e) => {
    const code = (e as { code?: unknown } | undefined)?.code;
    return typeof code === "string" && NETWORK.test(code);
  });
}

/**
 * badNode reports whether err says the node is the problem, not the
 * request: it could not be reached, broke the connection, did not answer
 * within an attempt's deadline (DeadlineExceeded raised by the client), or
 * answered Unavailable.
 */
export function badNode(err: RewindError): boolean {
  return err.code === Code.Unavailable || broken(err) || noAnswers.has(err);
}

// The errors made by noAnswer (a WeakSet: no field on the public class).
const noAnswers = new WeakSet<RewindError>();

/**
 * noAnswer is the DeadlineExceeded error of an attempt or a stream's open
 * that the client itself cut off because url sent nothing within ms: the
 * node, not the request, is the problem (see badNode).
 */
export function noAnswer(what: string, url: string, ms: number, cause: unknown): RewindError {
  const err = new RewindError(new ConnectError(`no ${what} from ${url} within ${ms} ms`, Code.DeadlineExceeded, undefined, undefined, cause));
  noAnswers.add(err);
  return err;
}

/** notDone reports whether a call certainly did nothing: its connection was refused, or the node stored nothing. */
export function notDone(err: RewindError): boolean {
  if (err.notStored) return true;
  return causes(err).some(
    (e) => (e as { code?: unknown }).code === "ECONNREFUSED" || (e instanceof Error && /ECONNREFUSED/.test(e.message)),
  );
}

/** retryable reports whether a call that may run twice is worth another attempt after err. */
export function retryable(err: RewindError): boolean {
  return [Code.Unavailable, Code.DeadlineExceeded, Code.ResourceExhausted, Code.Aborted].includes(err.code);
}

// causes is err and the chain of its causes (at most 16 deep, no cycles).
function causes(err: unknown): unknown[] {
  const out: unknown[] = [];
  for (let e = err; e !== undefined && e !== null && out.length < 16 && !out.includes(e); ) {
    out.push(e);
    e = (e as { cause?: unknown }).cause;
  }
  return out;
}
