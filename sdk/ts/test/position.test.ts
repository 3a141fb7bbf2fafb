// The position grammar, ported with the Go client's tests
// (sdk/client/position_test.go): the same strings mean the same positions.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Position,
  formatPosition,
  parseDuration,
  parseGoDuration,
  formatGoDuration,
  parsePosition,
  resetTargetProto,
  startProto,
  stopProto,
} from "../src/index.js";

const H = 3_600_000_000_000n;

test("parsePosition: every kind", () => {
  const cases: [string, Position][] = [
    ["earliest", { kind: "earliest" }],
    ["beginning", { kind: "earliest" }],
    ["first", { kind: "earliest" }],
    ["latest", { kind: "latest" }],
    ["end", { kind: "end" }],
    ["now", { kind: "end" }],
    ["0", { kind: "offset", offset: 0n }],
    ["42", { kind: "offset", offset: 42n }],
    ["18446744073709551615", { kind: "offset", offset: 18446744073709551615n }],
    ["-10", { kind: "recordsBack", count: 10n }],
    ["-0", { kind: "recordsBack", count: 0n }],
    ["-15m", { kind: "timeBack", nanos: 15n * 60_000_000_000n }],
    ["-1h30m", { kind: "timeBack", nanos: H + 30n * 60_000_000_000n }],
    ["-7d", { kind: "timeBack", nanos: 7n * 24n * H }],
    ["-1.5d", { kind: "timeBack", nanos: 36n * H }],
    ["-250ms", { kind: "timeBack", nanos: 250_000_000n }],
    ["@2026-12-01T10:00:00Z", { kind: "time", time: { seconds: 1796119200n, nanos: 0 } }],
    ["@2026-12-01T11:00:00+01:00", { kind: "time", time: { seconds: 1796119200n, nanos: 0 } }],
    ["@2026-12-01T10:00:00.5Z", { kind: "time", time: { seconds: 1796119200n, nanos: 500_000_000 } }],
    ["id:AAAB-x_1", { kind: "messageId", id: "AAAB-x_1" }],
    ["token:abc", { kind: "resumeToken", token: "abc" }],
    ["+5", { kind: "shift", count: 5n }],
  ];
  for (const [input, want] of cases) assert.deepEqual(parsePosition(input), want, input);
});

test("parsePosition: bad input says what is accepted", () => {
  for (const [input, want] of [
    ["", /empty position/],
    ["later", /want earliest, latest, end, N, @time/],
    ["-", /-N is records back/],
    ["-0s", /-N is records back/], // not positive
    ["--5m", /-N is records back/],
    ["-5x", /-N is records back/],
    ["@yesterday", /a time is @RFC3339/],
    ["@2026-02-30T00:00:00Z", /a time is @RFC3339/],
    ["@2026-12-01T24:00:00Z", /a time is @RFC3339/],
    ["@2026-12-01 10:00:00Z", /a time is @RFC3339/],
    ["@2026-12-01T10:00:00", /a time is @RFC3339/],
    ["+x", /\+N shifts/],
    ["18446744073709551616", /want earliest/],
    ["1.5", /want earliest/],
  ] as const) {
    assert.throws(() => parsePosition(input), want, input);
  }
});

// TestParsePositionTimesAreFaithful: a time far in the future or the past
// reaches the server as the same instant (the proto Timestamp has the range
// of the years 1 to 9999); times beyond that range are refused here.
test("parsePosition: times are faithful", () => {
  for (const [input, seconds, nanos] of [
    ["@9999-12-31T23:59:59Z", 253402300799n, 0],
    ["@9999-12-31T23:59:59.999999999Z", 253402300799n, 999999999],
    ["@1600-01-01T00:00:00Z", -11676096000n, 0],
    ["@0001-01-01T00:00:00Z", -62135596800n, 0],
    ["@2262-04-12T00:00:00Z", 9223372800n, 0],
    ["@253402300799999", 253402300799n, 999000000], // Unix ms, the last ms of 9999
    ["@-11676096000000", -11676096000n, 0], // Unix ms, 1600
    ["@-62135596800000", -62135596800n, 0], // Unix ms, year 1
    ["@1764583200000", 1764583200n, 0], // Unix ms, 2025-12-01T10:00:00Z
    ["@1764583200001", 1764583200n, 1000000], // one ms later
    ["@-1", -1n, 999000000], // one ms before the epoch
    ["@1969-12-31T23:59:59.999Z", -1n, 999000000], // the same as RFC 3339
  ] as const) {
    const p = parsePosition(input);
    const start = startProto(p).position;
    const stop = stopProto(p).position;
    for (const ts of [start, stop]) {
      assert.equal(ts.case, "time", input);
      assert.equal(ts.value.seconds, seconds, input);
      assert.equal(ts.value.nanos, nanos, input);
    }
  }
  for (const input of ["@253402300800000", "@-62135596800001", "@9223372036854775807", "@-9223372036854775808"]) {
    assert.throws(() => parsePosition(input), /0001 to 9999/, input);
  }
});

// TestParseDurationDoesNotWrap: a day count beyond the range of a Go
// duration is an error, not a wrapped (negative or small) duration.
test("parseDuration does not wrap", () => {
  for (const input of ["106752d", "1e10d", "-1e10d", "infd", "-infd", "nand", "1e400d"]) {
    assert.throws(() => parseDuration(input), Error, input);
  }
  for (const [input, want] of [
    ["7d", 7n * 24n * H],
    ["1.5d", 36n * H],
    ["-2d", -48n * H],
    ["106751d", 106751n * 24n * H],
  ] as const) {
    assert.equal(parseDuration(input), want, input);
  }
  assert.equal(parseDuration("9223372036854775807ns"), 9223372036854775807n);
  assert.throws(() => parseGoDuration("9223372036854775808ns"));
  assert.equal(parseGoDuration("-9223372036854775808ns"), -9223372036854775808n);
});

test("Go durations parse and print like Go", () => {
  for (const [input, ns, printed] of [
    ["0", 0n, "0s"],
    ["1h", H, "1h0m0s"],
    ["1h30m", H + 30n * 60_000_000_000n, "1h30m0s"],
    ["1.5s", 1_500_000_000n, "1.5s"],
    ["15m", 15n * 60_000_000_000n, "15m0s"],
    ["100ms", 100_000_000n, "100ms"],
    ["1.5µs", 1500n, "1.5µs"],
    ["2us", 2000n, "2µs"],
    ["3ns", 3n, "3ns"],
    ["-1m", -60_000_000_000n, "-1m0s"],
    ["1h0.5m", H + 30_000_000_000n, "1h0m30s"],
  ] as const) {
    assert.equal(parseGoDuration(input), ns, input);
    assert.equal(formatGoDuration(ns), printed, input);
  }
  for (const bad of ["", "1", "1x", ".s", "1h-5m", "-", "s"]) {
    assert.throws(() => parseGoDuration(bad), Error, bad);
  }
});

test("formatPosition round-trips", () => {
  for (const s of [
    "earliest",
    "latest",
    "end",
    "42",
    "-10",
    "-15m0s",
    "@2026-12-01T10:00:00Z",
    "@2026-12-01T10:00:00.000000001Z",
    "@0001-01-01T00:00:00Z",
    "@1969-12-31T23:59:59.999Z",
    "id:x",
    "token:y",
    "+3",
    "-3",
  ]) {
    assert.equal(formatPosition(parsePosition(s)), s);
  }
  assert.equal(formatPosition(Position.timeBack("7d")), "-168h0m0s");
  assert.equal(formatPosition(Position.time(new Date("2026-12-01T10:00:00.250Z"))), "@2026-12-01T10:00:00.25Z");
});

test("start, stop and reset positions refuse what they cannot mean", () => {
  assert.throws(() => startProto(parsePosition("end")), /not a start position/);
  assert.throws(() => startProto(parsePosition("+1")), /not a start position/);
  assert.throws(() => stopProto(parsePosition("earliest")), /not a stop position/);
  assert.throws(() => stopProto(parsePosition("-5")), /not a stop position/);
  assert.throws(() => stopProto(parsePosition("token:x")), /not a stop position/);
  assert.throws(() => resetTargetProto(parsePosition("token:x")), /not a reset target/);
  assert.equal(stopProto(parsePosition("latest")).position.case, "end");
  // A time back stops at the time it names when the stream starts.
  const now = { seconds: 1000n, nanos: 0 };
  const stop = stopProto(parsePosition("-1m"), now).position;
  assert.equal(stop.case, "time");
  assert.equal(stop.value.seconds, 940n);
  // -N as a reset target re-reads N records: a negative shift.
  assert.deepEqual(resetTargetProto(parsePosition("-5")).target, { case: "shift", value: -5n });
  assert.deepEqual(resetTargetProto(parsePosition("end")).target, { case: "latest", value: true });
});
