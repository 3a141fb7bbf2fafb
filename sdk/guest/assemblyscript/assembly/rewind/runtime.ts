// The guest side of ABI v1 behind the exports in abi.ts: the static
// buffers, the registered handlers, and the per-call loop that decodes
// records and runs the filter or transform on each.

import { Bytes } from "./bytes";
import { Record, decodeRecord } from "./record";
import { Output } from "./output";

/**
 * Size of the input buffer in bytes: 2 MiB, or the integer given to the
 * compiler as `--use REWIND_INPUT_CAP=<bytes>`. The host never sends a call
 * (records or config) larger than this, and fails a replay whose single
 * record does not fit.
 */
export const INPUT_CAP: i32 = isDefined(REWIND_INPUT_CAP) ? REWIND_INPUT_CAP : 2 << 20;

/** Size of the output buffer in bytes: 2 MiB, or `--use REWIND_OUTPUT_CAP=<bytes>`. */
export const OUTPUT_CAP: i32 = isDefined(REWIND_OUTPUT_CAP) ? REWIND_OUTPUT_CAP : 2 << 20;

// Static, zero-filled at instantiation and never moved: the host reads the
// addresses once. Binaryen drops zero data, so they cost no module bytes.
/** Address of the input buffer. */
export const INPUT: usize = memory.data(INPUT_CAP, 16);
/** Address of the output buffer. */
export const OUTPUT: usize = memory.data(OUTPUT_CAP, 16);

// @ts-ignore: decorator
@external("rewind", "log")
declare function hostLog(ptr: usize, len: i32): void;

// Log lines are encoded into this scratch buffer, so logging does not allocate.
const LOG_UNITS: i32 = 1024;
const logBuf: usize = memory.data(LOG_UNITS * 3);

/** Logs msg (UTF-8, truncated to 1,024 UTF-16 units) through rewind.log. Allocates nothing. */
export function log(msg: string): void {
  const n = min(msg.length, LOG_UNITS);
  const len = String.UTF8.encodeUnsafe(changetype<usize>(msg), n, logBuf);
  hostLog(logBuf, <i32>len);
}

// log2 logs a followed by b, without concatenating (and allocating).
function log2(a: string, b: string): void {
  const na = min(a.length, LOG_UNITS);
  const nb = min(b.length, LOG_UNITS - na);
  let len = String.UTF8.encodeUnsafe(changetype<usize>(a), na, logBuf);
  len += String.UTF8.encodeUnsafe(changetype<usize>(b), nb, logBuf + len);
  hostLog(logBuf, <i32>len);
}

/** Logs raw bytes through rewind.log (the host truncates long lines). */
export function logBytes(b: Bytes): void {
  hostLog(b.ptr, b.len);
}

/** A filter: true keeps the record (delivered unchanged), false drops it. */
export type FilterFn = (r: Record) => bool;

/**
 * A transform: writes what to deliver for `r` to `out` — nothing (drop),
 * out.keep(), or one or more replacements.
 */
export type TransformFn = (r: Record, out: Output) => void;

/**
 * Reads the config (valid only during the call: copy what you keep with
 * Bytes.clone or the Json decode helpers). false rejects it, and the
 * replay fails.
 */
export type InitFn = (config: Bytes) => bool;

// What rewind_filter runs: filterAll or transformAll once a handler is
// registered. Through a function reference, so that a filter module does
// not carry the transform loop and vice versa.
type RunFn = (count: i32, len: i32) => i32;
let run: RunFn = noRun;
let registered = false;
let filterFn: FilterFn = noFilter;
let transformFn: TransformFn = noTransform;
let initFn: InitFn = noInit;
let failed = false;

const record = new Record();
const output = new Output();
const configView = new Bytes();

function noRun(count: i32, len: i32): i32 {
  log("rewind: no handler registered");
  return -1;
}

function noFilter(r: Record): bool {
  return false;
}

function noTransform(r: Record, out: Output): void {}

function noInit(config: Bytes): bool {
  return true;
}

/** Registers the module's filter, replacing any filter or transform set before. */
export function setFilter(fn: FilterFn): void {
  filterFn = fn;
  run = filterAll;
  registered = true;
}

/** Registers the module's transform, replacing any filter or transform set before. */
export function setTransform(fn: TransformFn): void {
  transformFn = fn;
  run = transformAll;
  registered = true;
}

/** Registers the config reader run by rewind_init. Without one, the config is ignored. */
export function onInit(fn: InitFn): void {
  initFn = fn;
}

/**
 * Logs msg and makes the current rewind_init or rewind_filter call fail
 * (rewind_init returns 1, rewind_filter -1) once the handler returns.
 */
export function fail(msg: string): void {
  log(msg);
  failed = true;
}

/** rewind_init: checks that a handler is registered and runs the config reader. */
export function runInit(configLen: i32): i32 {
  if (configLen < 0 || configLen > INPUT_CAP) {
    log("rewind: config length out of range");
    return 1;
  }
  if (!registered) {
    log("rewind: no handler registered: call setFilter or setTransform at top level");
    return 1;
  }
  failed = false;
  const ok = initFn(configView.set(INPUT, configLen));
  return ok && !failed ? 0 : 1;
}

/** rewind_filter: runs the handler on each of the count records in input[0:len]. */
export function runFilter(count: i32, len: i32): i32 {
  if (count < 0 || len < 0 || len > INPUT_CAP) {
    log("rewind: rewind_filter arguments out of range");
    return -1;
  }
  failed = false;
  return run(count, len);
}

function filterAll(count: i32, len: i32): i32 {
  const fn = filterFn;
  const r = record;
  const end = INPUT + <usize>len;
  let p = INPUT;
  let o: usize = 0;
  for (let i = 0; i < count; i++) {
    p = decodeRecord(r, p, end);
    if (p == 0) return malformed(i);
    r.index = i;
    if (fn(r)) {
      if (o + 5 > <usize>OUTPUT_CAP) return -2;
      store<u32>(OUTPUT + o, i);
      store<u8>(OUTPUT + o, 0, 4);
      o += 5;
    }
    if (failed) return -1;
  }
  if (p != end) return malformed(-1);
  return <i32>o;
}

function transformAll(count: i32, len: i32): i32 {
  const fn = transformFn;
  const r = record;
  const out = output;
  out.start(OUTPUT, <usize>OUTPUT_CAP);
  out.select(r);
  const end = INPUT + <usize>len;
  let p = INPUT;
  for (let i = 0; i < count; i++) {
    p = decodeRecord(r, p, end);
    if (p == 0) return malformed(i);
    r.index = i;
    fn(r, out);
    if (failed) return -1;
    const misuse = out.misuse;
    if (misuse != null) {
      log2("rewind: transform output: ", misuse);
      return -1;
    }
    if (!out.idle) {
      log("rewind: transform returned inside a replacement");
      return -1;
    }
    if (out.overflow) return -2;
  }
  if (p != end) return malformed(-1);
  return out.length;
}

function malformed(i: i32): i32 {
  log(i < 0 ? "rewind: malformed input after the last record" : "rewind: malformed input record");
  return -1;
}
