// Go's duration grammar (time.ParseDuration and Duration.String), plus the
// "d" (24 h) unit of the CLI, so that a position or retention written for
// the CLI means the same here. Durations are bigint nanoseconds, bounded
// like Go's int64. durationProto turns one into a protobuf Duration.

import { create } from "@bufbuild/protobuf";
import { DurationSchema, type Duration } from "@bufbuild/protobuf/wkt";

/** A duration: milliseconds, or a Go duration string with days ("15m", "7d"). */
export type DurationLike = number | string;

/** durationProto turns a DurationLike into a protobuf Duration. */
export function durationProto(d: DurationLike): Duration {
  const ns = typeof d === "string" ? parseDuration(d) : BigInt(Math.round(d * 1e6));
  return create(DurationSchema, { seconds: ns / 1_000_000_000n, nanos: Number(ns % 1_000_000_000n) });
}

/** The largest duration Go (and so the server) represents, in nanoseconds. */
export const MAX_DURATION_NS = (1n << 63n) - 1n;
const MIN_DURATION_NS = -(1n << 63n);

const UNITS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  "µs": 1_000n, // U+00B5
  "μs": 1_000n, // U+03BC
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

const DAY_NS = 24n * UNITS.h;

/**
 * parseGoDuration parses Go's time.ParseDuration syntax ("1h30m", "15m",
 * "1.5s", "-2h", "0") into nanoseconds. It throws on bad syntax and on a
 * duration beyond Go's int64 range, as Go does (it never wraps).
 */
export function parseGoDuration(s: string): bigint {
  const orig = s;
  let neg = false;
  if (s !== "" && (s[0] === "-" || s[0] === "+")) {
    neg = s[0] === "-";
    s = s.slice(1);
  }
  if (s === "0") return 0n;
  if (s === "") throw new Error(`time: invalid duration "${orig}"`);
  let total = 0n;
  while (s !== "") {
    const m = /^([0-9]*)(?:\.([0-9]*))?/.exec(s)!;
    const intPart = m[1];
    const fracPart = m[2];
    if (intPart === "" && (fracPart === undefined || fracPart === "")) {
      throw new Error(`time: invalid duration "${orig}"`);
    }
    s = s.slice(m[0].length);
    const u = /^[^0-9.]+/.exec(s);
    if (!u) throw new Error(`time: missing unit in duration "${orig}"`);
    const unit = UNITS[u[0]];
    if (unit === undefined) throw new Error(`time: unknown unit "${u[0]}" in duration "${orig}"`);
    s = s.slice(u[0].length);
    let v = BigInt(intPart === "" ? "0" : intPart) * unit;
    if (fracPart) {
      v += (BigInt(fracPart) * unit) / 10n ** BigInt(fracPart.length);
    }
    total += v;
    if (total > -MIN_DURATION_NS) throw new Error(`time: invalid duration "${orig}"`);
  }
  if (neg) total = -total;
  if (total > MAX_DURATION_NS || total < MIN_DURATION_NS) {
    throw new Error(`time: invalid duration "${orig}"`);
  }
  return total;
}

/**
 * parseDuration is parseGoDuration plus a "d" (24 h) unit: "7d", "1.5d",
 * "36h", "15m". Like Go it refuses a duration beyond about ±292 years
 * rather than wrap.
 */
export function parseDuration(s: string): bigint {
  if (s.endsWith("d")) {
    const days = s.slice(0, -1);
    // The float syntax of Go's strconv.ParseFloat that matters here; "inf"
    // and "nan" parse there too, and are out of range below.
    if (!/^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)$/i.test(days)) {
      throw new Error(`strconv.ParseFloat: parsing "${days}": invalid syntax`);
    }
    const n = Number(days.replace(/^([+-]?)inf(inity)?$/i, "$1Infinity").replace(/^[+-]?nan$/i, "NaN"));
    const ns = n * Number(DAY_NS);
    // Compared as floats, as in Go: 2^63 is exact in a float64.
    if (Number.isNaN(ns) || ns >= 2 ** 63 || ns < -(2 ** 63)) {
      throw new Error(`time: invalid duration "${s}": out of range`);
    }
    // Exact for whole days (the common case); a fraction of a day is
    // rounded to the nanosecond like Go's float conversion.
    if (Number.isInteger(n) && Number.isSafeInteger(n)) return BigInt(n) * DAY_NS;
    return BigInt(Math.trunc(ns));
  }
  return parseGoDuration(s);
}

/** formatGoDuration renders nanoseconds like Go's Duration.String ("1h0m0s", "1.5s", "0s"). */
export function formatGoDuration(ns: bigint): string {
  if (ns === 0n) return "0s";
  const neg = ns < 0n;
  let u = neg ? -ns : ns;
  let out: string;
  if (u < 1_000_000_000n) {
    // Below a second: the largest of ns, µs, ms that fits, with a fraction.
    let unit: string;
    let scale: bigint;
    if (u < 1_000n) {
      return (neg ? "-" : "") + u.toString() + "ns";
    } else if (u < 1_000_000n) {
      unit = "µs";
      scale = 1_000n;
    } else {
      unit = "ms";
      scale = 1_000_000n;
    }
    out = fraction(u, scale) + unit;
  } else {
    const h = u / UNITS.h;
    u -= h * UNITS.h;
    const m = u / UNITS.m;
    u -= m * UNITS.m;
    out = fraction(u, 1_000_000_000n) + "s";
    if (h > 0n) out = `${h}h${m}m` + out;
    else if (m > 0n) out = `${m}m` + out;
  }
  return (neg ? "-" : "") + out;
}

function fraction(v: bigint, scale: bigint): string {
  const whole = v / scale;
  const frac = v % scale;
  if (frac === 0n) return whole.toString();
  const digits = scale.toString().length - 1;
  return whole.toString() + "." + frac.toString().padStart(digits, "0").replace(/0+$/, "");
}
