// Bytes: a view of bytes somewhere in linear memory (pointer + length).
//
// Views handed to a filter or transform point into the input buffer and are
// valid only during that call; the SDK reuses the view objects for the next
// record. Keep nothing from them across calls except through clone(), which
// copies (and allocates, so use it in onInit, never per record).

/** A view of `len` bytes at address `ptr`. Comparing views never allocates. */
@final
export class Bytes {
  constructor(
    /** Address of the first byte. */
    public ptr: usize = 0,
    /** Number of bytes. Invariant: 0 <= len. */
    public len: i32 = 0,
  ) {}

  /** Points this view at `len` bytes at `ptr` and returns it. */
  @inline
  set(ptr: usize, len: i32): Bytes {
    this.ptr = ptr;
    this.len = len;
    return this;
  }

  /** Makes this view show the same bytes as `other` and returns it. */
  @inline
  setFrom(other: Bytes): Bytes {
    this.ptr = other.ptr;
    this.len = other.len;
    return this;
  }

  /** The byte at index `i` (unchecked: 0 <= i < len is the caller's duty). */
  @inline
  at(i: i32): u8 {
    return load<u8>(this.ptr + <usize>i);
  }

  /** Whether this view and `other` hold the same bytes. */
  equals(other: Bytes): bool {
    return this.len == other.len && memEqual(this.ptr, other.ptr, this.len);
  }

  /** Whether this view begins with the bytes of `prefix`. */
  startsWith(prefix: Bytes): bool {
    return this.len >= prefix.len && memEqual(this.ptr, prefix.ptr, prefix.len);
  }

  /** Whether this view ends with the bytes of `suffix`. */
  endsWith(suffix: Bytes): bool {
    return (
      this.len >= suffix.len &&
      memEqual(this.ptr + <usize>(this.len - suffix.len), suffix.ptr, suffix.len)
    );
  }

  /** Index of the first `b` at or after `from`, or -1. */
  indexOfByte(b: u8, from: i32 = 0): i32 {
    for (let i = max(from, 0); i < this.len; i++) {
      if (load<u8>(this.ptr + <usize>i) == b) return i;
    }
    return -1;
  }

  /** Index of the first occurrence of `needle` at or after `from`, or -1. */
  indexOf(needle: Bytes, from: i32 = 0): i32 {
    const n = needle.len;
    if (n == 0) return min(max(from, 0), this.len);
    const first = load<u8>(needle.ptr);
    for (let i = max(from, 0); i <= this.len - n; i++) {
      const p = this.ptr + <usize>i;
      if (load<u8>(p) == first && memEqual(p, needle.ptr, n)) return i;
    }
    return -1;
  }

  /** Whether the view holds exactly the UTF-8 encoding of `s` (no allocation). */
  equalsString(s: string): bool {
    return utf8Match(this.ptr, this.len, s) == this.len;
  }

  /** Whether the view begins with the UTF-8 encoding of `s` (no allocation). */
  startsWithString(s: string): bool {
    return utf8Match(this.ptr, this.len, s) >= 0;
  }

  /** Points `out` at bytes [start, end) of this view (clamped) and returns it. */
  slice(start: i32, end: i32, out: Bytes): Bytes {
    const s = min(max(start, 0), this.len);
    const e = min(max(end, s), this.len);
    return out.set(this.ptr + <usize>s, e - s);
  }

  /** A copy of the bytes in fresh memory. Allocates: for onInit, not per record. */
  clone(): Bytes {
    const p = heap.alloc(<usize>max(this.len, 1));
    memory.copy(p, this.ptr, <usize>this.len);
    return new Bytes(p, this.len);
  }

  /** The bytes decoded as UTF-8. Allocates: for onInit and logging. */
  toString(): string {
    return String.UTF8.decodeUnsafe(this.ptr, <usize>this.len);
  }

  /** The UTF-8 encoding of `s` in fresh memory. Allocates: for onInit. */
  static fromString(s: string): Bytes {
    const n = String.UTF8.byteLength(s);
    const p = heap.alloc(<usize>max(n, 1));
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, p);
    return new Bytes(p, n);
  }
}

/** Whether the `n` bytes at `a` and at `b` are equal. Unaligned 8-byte steps. */
export function memEqual(a: usize, b: usize, n: i32): bool {
  let i: i32 = 0;
  while (i + 8 <= n) {
    if (load<u64>(a + <usize>i) != load<u64>(b + <usize>i)) return false;
    i += 8;
  }
  if (i + 4 <= n) {
    if (load<u32>(a + <usize>i) != load<u32>(b + <usize>i)) return false;
    i += 4;
  }
  while (i < n) {
    if (load<u8>(a + <usize>i) != load<u8>(b + <usize>i)) return false;
    i++;
  }
  return true;
}

// utf8Match compares the bytes at [p, p+n) with the UTF-8 (WTF-8 for lone
// surrogates, as String.UTF8.encode does) encoding of s. It returns the
// encoding's length when the bytes begin with it, and -1 otherwise.
function utf8Match(p: usize, n: i32, s: string): i32 {
  const units = s.length;
  const sp = changetype<usize>(s);
  let o: i32 = 0;
  for (let i = 0; i < units; i++) {
    let c = <u32>load<u16>(sp + (<usize>i << 1));
    if (c < 0x80) {
      if (o >= n || <u32>load<u8>(p + <usize>o) != c) return -1;
      o++;
      continue;
    }
    if ((c & 0xfc00) == 0xd800 && i + 1 < units) {
      const c2 = <u32>load<u16>(sp + (<usize>(i + 1) << 1));
      if ((c2 & 0xfc00) == 0xdc00) {
        c = 0x10000 + (((c & 0x3ff) << 10) | (c2 & 0x3ff));
        i++;
      }
    }
    let len: i32;
    let enc: u32;
    if (c < 0x800) {
      len = 2;
      enc = (0xc0 | (c >> 6)) | ((0x80 | (c & 0x3f)) << 8);
    } else if (c < 0x10000) {
      len = 3;
      enc = (0xe0 | (c >> 12)) | ((0x80 | ((c >> 6) & 0x3f)) << 8) | ((0x80 | (c & 0x3f)) << 16);
    } else {
      len = 4;
      enc =
        (0xf0 | (c >> 18)) |
        ((0x80 | ((c >> 12) & 0x3f)) << 8) |
        ((0x80 | ((c >> 6) & 0x3f)) << 16) |
        ((0x80 | (c & 0x3f)) << 24);
    }
    if (o + len > n) return -1;
    for (let k = 0; k < len; k++) {
      if (<u32>load<u8>(p + <usize>(o + k)) != ((enc >> (<u32>k << 3)) & 0xff)) return -1;
    }
    o += len;
  }
  return o;
}
