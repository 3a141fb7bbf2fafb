// Positions: where a stream starts or stops, and where a group reset moves
// its offsets. The grammar and its meaning are the CLI's and the Go
// client's (sdk/client/position.go), so a position copied from one works in
// the others.

import { create } from "@bufbuild/protobuf";
import { DurationSchema, TimestampSchema, type Timestamp } from "@bufbuild/protobuf/wkt";
import { StartPositionSchema, StopPositionSchema, type StartPosition, type StopPosition } from "./gen/rewind/v1/subscribe_pb.js";
import { ResetTargetSchema, type ResetTarget } from "./gen/rewind/v1/group_pb.js";
import { formatGoDuration, parseDuration } from "./duration.js";

/** An instant with nanosecond precision: seconds and nanoseconds since the Unix epoch (nanos in [0, 1e9)). */
export interface Instant {
  seconds: bigint;
  nanos: number;
}

/**
 * Position is where a stream starts (`from`) or stops (`to`), or where a
 * group reset moves offsets. Build one with the helpers of `Position`
 * (`Position.offset(5n)`), or write it in the CLI syntax (see
 * parsePosition): every API that takes a position takes a string too.
 */
export type Position =
  | { kind: "earliest" }
  | { kind: "latest" }
  | { kind: "end" }
  | { kind: "offset"; offset: bigint }
  | { kind: "time"; time: Instant }
  | { kind: "messageId"; id: string }
  | { kind: "recordsBack"; count: bigint }
  | { kind: "timeBack"; nanos: bigint }
  | { kind: "resumeToken"; token: string }
  | { kind: "shift"; count: bigint };

/**
 * PositionLike is what the API takes as a position: a Position, a string
 * in the CLI syntax, a Date (a time), or a number or bigint (an offset).
 */
export type PositionLike = Position | string | Date | number | bigint;

const MIN_SECONDS = -62135596800n; // 0001-01-01T00:00:00Z
const MAX_SECONDS = 253402300799n; // 9999-12-31T23:59:59Z
const U64_MAX = (1n << 64n) - 1n;
const I64_MAX = (1n << 63n) - 1n;

/** Constructors of every kind of Position. */
export const Position = {
  /** The first stored record of each partition. */
  earliest: (): Position => ({ kind: "earliest" }),
  /** The end of each partition: only new records. As a stop, the same as end. */
  latest: (): Position => ({ kind: "latest" }),
  /** As a stop: the end of each partition when the stream starts. */
  end: (): Position => ({ kind: "end" }),
  /** This offset in each selected partition. */
  offset: (n: number | bigint): Position => ({ kind: "offset", offset: u64(n, "offset") }),
  /** The first record appended at or after this time (exact to the nanosecond with an Instant). */
  time: (t: Date | Instant): Position => ({ kind: "time", time: instantOf(t) }),
  /** The first record appended at or after this many nanoseconds since the Unix epoch (a record's appendTimeUnixNanos). */
  unixNanos: (ns: bigint): Position => {
    let seconds = ns / 1_000_000_000n;
    let rem = ns % 1_000_000_000n;
    if (rem < 0n) {
      seconds -= 1n;
      rem += 1_000_000_000n;
    }
    return { kind: "time", time: { seconds, nanos: Number(rem) } };
  },
  /** The record with this ID (other partitions: the first record at or after its append time). */
  messageId: (id: string): Position => ({ kind: "messageId", id }),
  /** n records before the end of each partition (clamped to the log start). */
  recordsBack: (n: number | bigint): Position => ({ kind: "recordsBack", count: u64(n, "records back") }),
  /** The first record appended at or after now minus this many milliseconds (or a Go duration such as "15m"). */
  timeBack: (d: number | string): Position => {
    const nanos = typeof d === "string" ? parseDuration(d) : BigInt(Math.round(d * 1e6));
    if (nanos <= 0n) throw new RangeError(`time back must be positive, got ${String(d)}`);
    return { kind: "timeBack", nanos };
  },
  /** Continue exactly where an earlier stream's token says. */
  resumeToken: (token: string): Position => ({ kind: "resumeToken", token }),
  /** As a group reset target: move each committed offset by n records (negative: re-read n records). */
  shift: (n: number | bigint): Position => ({ kind: "shift", count: BigInt(n) }),
};

function u64(n: number | bigint, what: string): bigint {
  const v = BigInt(n);
  if (v < 0n || v > U64_MAX) throw new RangeError(`${what} ${v} is not an unsigned 64-bit integer`);
  return v;
}

function instantOf(t: Date | Instant): Instant {
  if (t instanceof Date) {
    const ms = t.getTime();
    if (Number.isNaN(ms)) throw new RangeError("invalid Date");
    return instantFromMillis(BigInt(ms));
  }
  return t;
}

function instantFromMillis(ms: bigint): Instant {
  let seconds = ms / 1000n;
  let rem = ms % 1000n;
  if (rem < 0n) {
    seconds -= 1n;
    rem += 1000n;
  }
  return { seconds, nanos: Number(rem) * 1_000_000 };
}

/** toPosition turns a PositionLike into a Position (parsing strings with parsePosition). */
export function toPosition(p: PositionLike): Position {
  if (typeof p === "string") return parsePosition(p);
  if (typeof p === "number" || typeof p === "bigint") return Position.offset(p);
  if (p instanceof Date) return Position.time(p);
  return p;
}

/**
 * parsePosition parses the CLI syntax:
 *
 *     earliest | latest | end | now      (end and now: the end as of the start)
 *     N                                  an offset
 *     @2026-11-30T10:00:00Z | @<unix-ms> a time (RFC 3339, or Unix milliseconds)
 *     -1h | -15m | -7d                   a duration ago
 *     -N                                 N records back from the end
 *     +N                                 (group resets) shift forward by N records
 *     id:<message-id>                    a message ID
 *     token:<resume-token>               a resume token
 *
 * It throws a RangeError that says what is accepted.
 */
export function parsePosition(s: string): Position {
  switch (s) {
    case "earliest":
    case "beginning":
    case "first":
      return Position.earliest();
    case "latest":
      return Position.latest();
    case "end":
    case "now":
      return Position.end();
    case "":
      throw new RangeError("empty position");
  }
  if (s.startsWith("+")) {
    const n = parseInt64(s.slice(1));
    if (n === undefined) throw new RangeError(`position "${s}": +N shifts a group's offsets forward by N records`);
    return Position.shift(n);
  }
  if (s.startsWith("id:")) return Position.messageId(s.slice(3));
  if (s.startsWith("token:")) return Position.resumeToken(s.slice(6));
  if (s.startsWith("@")) {
    const v = s.slice(1);
    let t = parseRFC3339(v);
    const ms = parseInt64(v);
    if (ms !== undefined) t = instantFromMillis(ms);
    if (t === undefined) {
      throw new RangeError(`position "${s}": a time is @RFC3339 (@2026-11-30T10:00:00Z) or @<unix-ms>`);
    }
    // The API's timestamps span the years 1 to 9999; only times beyond
    // are refused, here rather than as the server's less specific
    // InvalidArgument.
    if (t.seconds < MIN_SECONDS || t.seconds > MAX_SECONDS) {
      throw new RangeError(`position "${s}": a time must lie in the years 0001 to 9999`);
    }
    return { kind: "time", time: t };
  }
  if (s.startsWith("-")) {
    const v = s.slice(1);
    const n = parseUint64(v);
    if (n !== undefined) return { kind: "recordsBack", count: n };
    let d: bigint | undefined;
    try {
      d = parseDuration(v);
    } catch {
      d = undefined;
    }
    if (d === undefined || d <= 0n) {
      throw new RangeError(`position "${s}": -N is records back, -1h/-15m/-7d a duration ago`);
    }
    return { kind: "timeBack", nanos: d };
  }
  const n = parseUint64(s);
  if (n === undefined) {
    throw new RangeError(
      `position "${s}": want earliest, latest, end, N, @time, -duration, -N, id:<message-id> or token:<resume-token>`,
    );
  }
  return { kind: "offset", offset: n };
}

/** formatPosition renders p in the CLI syntax (parsePosition(formatPosition(p)) is p). */
export function formatPosition(p: Position): string {
  switch (p.kind) {
    case "earliest":
      return "earliest";
    case "latest":
      return "latest";
    case "end":
      return "end";
    case "offset":
      return p.offset.toString();
    case "time":
      return "@" + formatRFC3339(p.time);
    case "messageId":
      return "id:" + p.id;
    case "recordsBack":
      return "-" + p.count.toString();
    case "timeBack":
      return "-" + formatGoDuration(p.nanos);
    case "resumeToken":
      return "token:" + p.token;
    case "shift":
      return (p.count >= 0n ? "+" : "") + p.count.toString();
  }
}

// Go's strconv.ParseUint(s, 10, 64): digits only.
function parseUint64(s: string): bigint | undefined {
  if (!/^[0-9]+$/.test(s)) return undefined;
  const n = BigInt(s);
  return n <= U64_MAX ? n : undefined;
}

// Go's strconv.ParseInt(s, 10, 64): an optional sign, then digits.
function parseInt64(s: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = BigInt(s);
  return n <= I64_MAX && n >= -(I64_MAX + 1n) ? n : undefined;
}

const RFC3339 = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?(Z|([+-])([0-9]{2}):([0-9]{2}))$/;

/** parseRFC3339 parses an RFC 3339 time as Go's time.Parse(time.RFC3339Nano) does, exact to the nanosecond. */
export function parseRFC3339(s: string): Instant | undefined {
  const m = RFC3339.exec(s);
  if (!m) return undefined;
  const [year, month, day, hour, min, sec] = m.slice(1, 7).map(Number);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || min > 59 || sec > 59) {
    return undefined;
  }
  let offset = 0;
  if (m[8] !== "Z") {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offset = (oh * 60 + om) * 60 * (m[9] === "-" ? -1 : 1);
  }
  const days = daysFromCivil(year, month, day);
  const seconds = BigInt(days) * 86400n + BigInt(hour * 3600 + min * 60 + sec - offset);
  const nanos = m[7] ? Number(m[7].padEnd(9, "0")) : 0;
  return { seconds, nanos };
}

/** formatRFC3339 renders an instant in UTC like Go's RFC3339Nano (trailing zeros of the fraction dropped). */
export function formatRFC3339(t: Instant): string {
  const days = t.seconds >= 0n ? t.seconds / 86400n : -((-t.seconds + 86399n) / 86400n);
  const secOfDay = Number(t.seconds - days * 86400n);
  const [y, mo, d] = civilFromDays(Number(days));
  const p2 = (n: number) => String(n).padStart(2, "0");
  let out = `${String(y).padStart(4, "0")}-${p2(mo)}-${p2(d)}T${p2(Math.floor(secOfDay / 3600))}:${p2(Math.floor(secOfDay / 60) % 60)}:${p2(secOfDay % 60)}`;
  if (t.nanos !== 0) out += "." + String(t.nanos).padStart(9, "0").replace(/0+$/, "");
  return out + "Z";
}

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
function daysFromCivil(y: number, m: number, d: number): number {
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function civilFromDays(z: number): [number, number, number] {
  z += 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp + (mp < 10 ? 3 : -9);
  return [yoe + era * 400 + (m <= 2 ? 1 : 0), m, d];
}

function timestamp(t: Instant): Timestamp {
  return create(TimestampSchema, { seconds: t.seconds, nanos: t.nanos });
}

function nowInstant(): Instant {
  return instantFromMillis(BigInt(Date.now()));
}

function minusNanos(t: Instant, nanos: bigint): Instant {
  const total = t.seconds * 1_000_000_000n + BigInt(t.nanos) - nanos;
  let seconds = total / 1_000_000_000n;
  let rem = total % 1_000_000_000n;
  if (rem < 0n) {
    seconds -= 1n;
    rem += 1_000_000_000n;
  }
  return { seconds, nanos: Number(rem) };
}

function durationOf(nanos: bigint) {
  return create(DurationSchema, { seconds: nanos / 1_000_000_000n, nanos: Number(nanos % 1_000_000_000n) });
}

/** startProto is p as a stream's start; it throws a RangeError for a position that cannot start one. */
export function startProto(p: Position): StartPosition {
  const mk = (position: StartPosition["position"]) => create(StartPositionSchema, { position });
  switch (p.kind) {
    case "earliest":
      return mk({ case: "earliest", value: true });
    case "latest":
      return mk({ case: "latest", value: true });
    case "offset":
      return mk({ case: "offset", value: p.offset });
    case "time":
      return mk({ case: "time", value: timestamp(p.time) });
    case "messageId":
      return mk({ case: "messageId", value: p.id });
    case "recordsBack":
      return mk({ case: "recordsBack", value: p.count });
    case "timeBack":
      return mk({ case: "timeBack", value: durationOf(p.nanos) });
    case "resumeToken":
      return mk({ case: "resumeToken", value: p.token });
  }
  throw new RangeError(`${formatPosition(p)} is not a start position`);
}

/**
 * stopProto is p as a stream's stop, relative positions resolved against
 * now (a time back becomes the time it names); it throws a RangeError for a
 * position that cannot stop one.
 */
export function stopProto(p: Position, now: Instant = nowInstant()): StopPosition {
  const mk = (position: StopPosition["position"]) => create(StopPositionSchema, { position });
  switch (p.kind) {
    case "end":
    case "latest":
      return mk({ case: "end", value: true });
    case "offset":
      return mk({ case: "offset", value: p.offset });
    case "time":
      return mk({ case: "time", value: timestamp(p.time) });
    case "timeBack":
      return mk({ case: "time", value: timestamp(minusNanos(now, p.nanos)) });
    case "messageId":
      return mk({ case: "messageId", value: p.id });
  }
  throw new RangeError(`${formatPosition(p)} is not a stop position (use end, N, @time, -duration or id:)`);
}

/** resetTargetProto is p as a group reset target; it throws a RangeError for a position that is none. */
export function resetTargetProto(p: Position): ResetTarget {
  const mk = (target: ResetTarget["target"]) => create(ResetTargetSchema, { target });
  switch (p.kind) {
    case "earliest":
      return mk({ case: "earliest", value: true });
    case "latest":
    case "end":
      return mk({ case: "latest", value: true });
    case "offset":
      return mk({ case: "offset", value: p.offset });
    case "time":
      return mk({ case: "time", value: timestamp(p.time) });
    case "messageId":
      return mk({ case: "messageId", value: p.id });
    case "timeBack":
      return mk({ case: "timeBack", value: durationOf(p.nanos) });
    case "recordsBack":
      return mk({ case: "shift", value: -p.count });
    case "shift":
      return mk({ case: "shift", value: p.count });
  }
  throw new RangeError(
    `${formatPosition(p)} is not a reset target (use earliest, latest, N, @time, -duration, -N, +N or id:)`,
  );
}
