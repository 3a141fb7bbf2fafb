// Record: one input record of a rewind_filter call, decoded in place.
//
// The SDK owns a single Record and points its views into the input buffer
// for each record in turn, so the hot path allocates nothing. Everything a
// Record shows is valid only while the filter or transform runs.

import { Bytes } from "./bytes";

/** Iterates over the headers of a record, in their stored order. */
@final
export class HeaderIterator {
  /** Key of the current header (valid after next() returned true). */
  readonly key: Bytes = new Bytes();
  /** Value of the current header (valid after next() returned true). */
  readonly value: Bytes = new Bytes();
  private p: usize = 0;
  private left: i32 = 0;

  /** Starts over at the first header of `r`. */
  reset(r: Record): HeaderIterator {
    this.p = r.headersPtr + 4;
    this.left = r.headerCount;
    return this;
  }

  /** Advances to the next header; false when there is none. */
  next(): bool {
    if (this.left <= 0) return false;
    this.left--;
    let p = this.p;
    const kl = load<u32>(p);
    this.key.set(p + 4, <i32>kl);
    p += 4 + <usize>kl;
    const vl = load<u32>(p);
    this.value.set(p + 4, <i32>vl);
    this.p = p + 4 + <usize>vl;
    return true;
  }
}

/** One input record. Lengths were checked against the input when it was decoded. */
@final
export class Record {
  /** 0-based index of the record in the current call. */
  index: i32 = 0;
  /** Offset of the record in its partition. */
  offset: u64 = 0;
  /** Append time, Unix nanoseconds. */
  time: i64 = 0;
  /** The key bytes. */
  readonly key: Bytes = new Bytes();
  /** The value bytes. */
  readonly value: Bytes = new Bytes();
  /** Number of headers. */
  headerCount: i32 = 0;
  /** Address of the encoded header block: u32 header_count, then the headers. */
  headersPtr: usize = 0;
  /** Size in bytes of the encoded header block, header_count included. */
  headersLen: i32 = 0;

  private readonly scratch: Bytes = new Bytes();
  private readonly iter: HeaderIterator = new HeaderIterator();

  /**
   * The value of the first header whose key equals `name`, or null. The
   * returned view is reused by the next header() or headerString() call.
   */
  header(name: Bytes): Bytes | null {
    const it = this.iter.reset(this);
    while (it.next()) {
      if (it.key.equals(name)) return this.scratch.setFrom(it.value);
    }
    return null;
  }

  /** As header(), with the key given as a string (compared as UTF-8). */
  headerString(name: string): Bytes | null {
    const it = this.iter.reset(this);
    while (it.next()) {
      if (it.key.equalsString(name)) return this.scratch.setFrom(it.value);
    }
    return null;
  }

  /** Whether some header has key `name` and value `value`, both exactly. */
  hasHeader(name: Bytes, value: Bytes): bool {
    const it = this.iter.reset(this);
    while (it.next()) {
      if (it.key.equals(name) && it.value.equals(value)) return true;
    }
    return false;
  }

  /**
   * An iterator over all headers. It is shared with header() and
   * hasHeader(), so do not call those while iterating.
   */
  headers(): HeaderIterator {
    return this.iter.reset(this);
  }
}

// Fixed part of an encoded record after record_len: offset, time, key_len,
// value_len, header_count.
const FIXED: u32 = 8 + 8 + 4 + 4 + 4;

/**
 * Decodes the record at p (its u32 record_len) into r, checking every
 * length against end. Returns the address after the record, or 0 when the
 * encoding is malformed.
 */
export function decodeRecord(r: Record, p: usize, end: usize): usize {
  if (end - p < 4) return 0;
  const rl = load<u32>(p);
  p += 4;
  if (<usize>rl > end - p || rl < FIXED) return 0;
  const rend = p + <usize>rl;
  r.offset = load<u64>(p);
  r.time = load<i64>(p, 8);
  p += 16;
  const kl = load<u32>(p);
  p += 4;
  if (<usize>kl > rend - p || rend - p - <usize>kl < 8) return 0;
  r.key.set(p, <i32>kl);
  p += <usize>kl;
  const vl = load<u32>(p);
  p += 4;
  if (<usize>vl > rend - p || rend - p - <usize>vl < 4) return 0;
  r.value.set(p, <i32>vl);
  p += <usize>vl;
  r.headersPtr = p;
  r.headersLen = <i32>(rend - p);
  const hc = load<u32>(p);
  p += 4;
  // Each header takes at least 8 bytes, which also bounds hc.
  if (<usize>hc > (rend - p) >> 3) return 0;
  r.headerCount = <i32>hc;
  for (let i: u32 = 0; i < hc; i++) {
    if (rend - p < 4) return 0;
    const hk = load<u32>(p);
    p += 4;
    if (<usize>hk > rend - p || rend - p - <usize>hk < 4) return 0;
    p += <usize>hk;
    const hv = load<u32>(p);
    p += 4;
    if (<usize>hv > rend - p) return 0;
    p += <usize>hv;
  }
  return p == rend ? p : 0;
}
