// Zero-allocation JSON scanning over Bytes views.
//
// The scanner validates as strictly as RFC 8259 (and Go's json.Valid): the
// grammar of strings, numbers and literals, whitespace only as space, tab,
// CR and LF, nothing but whitespace after the text, and at most 10,000
// nested arrays and objects. Like json.Valid it does not check that string
// bytes are valid UTF-8. It never recurses, so hostile nesting cannot
// overflow the wasm stack, and it never allocates.
//
// Keys and string values are reported raw: the bytes between the quotes,
// escapes left as they are. The decode helpers at the end (decodeString,
// integerValue, stringArray) allocate and are meant for onInit's config.

import { Bytes } from "./bytes";

/** The type of a JSON value, from its first byte. */
export enum JsonKind {
  None = 0,
  String = 1,
  Number = 2,
  Object = 3,
  Array = 4,
  True = 5,
  False = 6,
  Null = 7,
}

/** Json.field result: the text is not a valid JSON object. */
export const JSON_INVALID: i32 = -1;
/** Json.field result: the object has no such field. */
export const JSON_MISSING: i32 = 0;

/** Nesting limit, as Go's encoding/json: arrays and objects, the outermost included. */
export const JSON_MAX_DEPTH: i32 = 10000;

const QUOTE: u8 = 0x22;
const BACKSLASH: u8 = 0x5c;
const COMMA: u8 = 0x2c;
const COLON: u8 = 0x3a;
const LBRACE: u8 = 0x7b;
const RBRACE: u8 = 0x7d;
const LBRACKET: u8 = 0x5b;
const RBRACKET: u8 = 0x5d;

// One bit per open container: 1 = object, 0 = array.
const stack: usize = memory.data(JSON_MAX_DEPTH / 8 + 8, 8);

/** Iterates over the members of a JSON object, validating as it goes. */
@final
export class JsonObject {
  /** Raw key of the current member: the bytes between its quotes. */
  readonly key: Bytes = new Bytes();
  /** Raw value of the current member, from its first to its last byte. */
  readonly value: Bytes = new Bytes();
  /** Kind of the current member's value. */
  kind: JsonKind = JsonKind.None;
  private p: usize = 0;
  private end: usize = 0;
  // 0 = finished, 1 = before the first member, 2 = after a member.
  private state: i32 = 0;
  private ok: bool = false;

  /**
   * Starts iterating over the object in `text`. Returns false (and next()
   * returns false, valid is false) unless the text, after whitespace,
   * starts with `{`.
   */
  reset(text: Bytes): bool {
    this.end = text.ptr + <usize>text.len;
    this.ok = false;
    this.kind = JsonKind.None;
    const p = skipWs(text.ptr, this.end);
    if (p >= this.end || load<u8>(p) != LBRACE) {
      this.state = 0;
      return false;
    }
    this.p = p + 1;
    this.state = 1;
    return true;
  }

  /**
   * Advances to the next member. Returns false at the end of the object or
   * at the first syntax error; valid then tells which.
   */
  next(): bool {
    if (this.state == 0) return false;
    const end = this.end;
    let p = skipWs(this.p, end);
    if (p >= end) return this.finish(false, p);
    const c = load<u8>(p);
    if (c == RBRACE) return this.finish(true, p + 1);
    if (this.state == 2) {
      if (c != COMMA) return this.finish(false, p);
      p = skipWs(p + 1, end);
    }
    if (p >= end || load<u8>(p) != QUOTE) return this.finish(false, p);
    const k = p + 1;
    p = scanString(p, end);
    if (p == 0) return this.finish(false, p);
    this.key.set(k, <i32>(p - 1 - k));
    p = skipWs(p, end);
    if (p >= end || load<u8>(p) != COLON) return this.finish(false, p);
    p = skipWs(p + 1, end);
    const v = p;
    p = scanValue(p, end, 1);
    if (p == 0) return this.finish(false, p);
    this.value.set(v, <i32>(p - v));
    this.kind = lastKind;
    this.p = p;
    this.state = 2;
    return true;
  }

  /**
   * After next() returned false: whether the whole text was one valid
   * JSON object followed only by whitespace.
   */
  @inline
  get valid(): bool {
    return this.ok;
  }

  private finish(closed: bool, p: usize): bool {
    this.state = 0;
    this.ok = closed && skipWs(p, this.end) == this.end;
    return false;
  }
}

/** Iterates over the elements of a JSON array, validating as it goes. */
@final
export class JsonArray {
  /** Raw current element, from its first to its last byte. */
  readonly value: Bytes = new Bytes();
  /** Kind of the current element. */
  kind: JsonKind = JsonKind.None;
  private p: usize = 0;
  private end: usize = 0;
  private state: i32 = 0;
  private ok: bool = false;

  /** Starts iterating over the array in `text` (false unless it starts with `[`). */
  reset(text: Bytes): bool {
    this.end = text.ptr + <usize>text.len;
    this.ok = false;
    this.kind = JsonKind.None;
    const p = skipWs(text.ptr, this.end);
    if (p >= this.end || load<u8>(p) != LBRACKET) {
      this.state = 0;
      return false;
    }
    this.p = p + 1;
    this.state = 1;
    return true;
  }

  /** Advances to the next element; false at the end or at an error (see valid). */
  next(): bool {
    if (this.state == 0) return false;
    const end = this.end;
    let p = skipWs(this.p, end);
    if (p >= end) return this.finish(false, p);
    const c = load<u8>(p);
    if (c == RBRACKET) return this.finish(true, p + 1);
    if (this.state == 2) {
      if (c != COMMA) return this.finish(false, p);
      p = skipWs(p + 1, end);
    }
    const v = p;
    p = scanValue(p, end, 1);
    if (p == 0) return this.finish(false, p);
    this.value.set(v, <i32>(p - v));
    this.kind = lastKind;
    this.p = p;
    this.state = 2;
    return true;
  }

  /** After next() returned false: whether the whole text was one valid array. */
  @inline
  get valid(): bool {
    return this.ok;
  }

  private finish(closed: bool, p: usize): bool {
    this.state = 0;
    this.ok = closed && skipWs(p, this.end) == this.end;
    return false;
  }
}

const scratchObject = new JsonObject();

/** Helpers over whole JSON texts. They share one iterator: not reentrant. */
export class Json {
  /** Whether `text` is one valid JSON value, optionally surrounded by whitespace. */
  static valid(text: Bytes): bool {
    const end = text.ptr + <usize>text.len;
    const p = scanValue(skipWs(text.ptr, end), end, 0);
    return p != 0 && skipWs(p, end) == end;
  }

  /** Kind of the valid JSON text `text`, or JsonKind.None when it is not valid. */
  static kindOf(text: Bytes): JsonKind {
    return Json.valid(text) ? lastKind : JsonKind.None;
  }

  /** Whether `text` is a valid JSON object (scans all of it). */
  static isObject(text: Bytes): bool {
    const it = scratchObject;
    it.reset(text);
    while (it.next()) {}
    return it.valid;
  }

  /**
   * Looks up the first top-level member of the object `text` whose raw key
   * equals `name`, validating the whole text. Returns JSON_INVALID when
   * `text` is not a valid object, JSON_MISSING when it has no such member,
   * and otherwise the member's JsonKind with `out` set to its raw value.
   */
  static field(text: Bytes, name: Bytes, out: Bytes): i32 {
    const it = scratchObject;
    it.reset(text);
    let found: i32 = JSON_MISSING;
    while (it.next()) {
      if (found == JSON_MISSING && it.key.equals(name)) {
        out.setFrom(it.value);
        found = it.kind;
      }
    }
    return it.valid ? found : JSON_INVALID;
  }

  /** If the raw value `value` is a string, points `out` at the bytes between its quotes. */
  static stringContent(value: Bytes, out: Bytes): bool {
    if (value.len < 2 || load<u8>(value.ptr) != QUOTE) return false;
    out.set(value.ptr + 1, value.len - 2);
    return true;
  }

  /** Whether the raw value is an integer literal (no fraction or exponent) that fits an i64. */
  static isInteger(value: Bytes): bool {
    const p = value.ptr;
    const n = value.len;
    let i = 0;
    const neg = n > 0 && load<u8>(p) == 0x2d;
    if (neg) i++;
    if (i >= n) return false;
    if (load<u8>(p + <usize>i) == 0x30) return i + 1 == n;
    let v: u64 = 0;
    // i64 magnitude limit: 2^63 - 1, or 2^63 when negative.
    const limit: u64 = neg ? 0x8000000000000000 : 0x7fffffffffffffff;
    for (; i < n; i++) {
      const d = <u32>load<u8>(p + <usize>i) - 0x30;
      if (d > 9) return false;
      if (v > (limit - d) / 10) return false;
      v = v * 10 + d;
    }
    return true;
  }

  /** The value of an integer literal; only meaningful when isInteger(value). */
  static integerValue(value: Bytes): i64 {
    const p = value.ptr;
    const n = value.len;
    let i = 0;
    const neg = n > 0 && load<u8>(p) == 0x2d;
    if (neg) i++;
    let v: u64 = 0;
    for (; i < n; i++) v = v * 10 + (<u64>load<u8>(p + <usize>i) - 0x30);
    return neg ? -(<i64>v) : <i64>v;
  }

  /**
   * The decoded bytes of a raw string value (escapes resolved, UTF-8 out,
   * invalid UTF-8 and unpaired surrogates replaced by U+FFFD, as Go's
   * encoding/json does), or null if `value` is not a string. Allocates.
   */
  static decodeString(value: Bytes): Bytes | null {
    const content = new Bytes();
    if (!Json.stringContent(value, content)) return null;
    const out = heap.alloc(<usize>content.len * 3 + 1);
    const n = unescape(content.ptr, content.ptr + <usize>content.len, out);
    return new Bytes(out, n);
  }

  /** The decoded strings of a raw array of strings, or null if it is anything else. Allocates. */
  static stringArray(value: Bytes): Array<Bytes> | null {
    const it = new JsonArray();
    const out = new Array<Bytes>();
    it.reset(value);
    while (it.next()) {
      if (it.kind != JsonKind.String) return null;
      out.push(Json.decodeString(it.value)!);
    }
    return it.valid ? out : null;
  }
}

// Kind of the value scanValue last accepted.
let lastKind: JsonKind = JsonKind.None;

@inline
function isWs(c: u32): bool {
  return c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09;
}

/** The first address at or after p that is not JSON whitespace (at most end). */
@inline
export function skipWs(p: usize, end: usize): usize {
  while (p < end && isWs(load<u8>(p))) p++;
  return p;
}

// scanString checks the string whose opening quote is at p and returns the
// address after its closing quote, or 0.
function scanString(p: usize, end: usize): usize {
  p++;
  while (p < end) {
    const c = load<u8>(p);
    if (c == QUOTE) return p + 1;
    if (c == BACKSLASH) {
      p++;
      if (p >= end) return 0;
      const e = load<u8>(p);
      if (e == 0x75) {
        // \uXXXX
        if (end - p < 5) return 0;
        for (let k: usize = 1; k <= 4; k++) {
          if (hexValue(load<u8>(p + k)) < 0) return 0;
        }
        p += 5;
        continue;
      }
      if (
        e != QUOTE && e != BACKSLASH && e != 0x2f && e != 0x62 &&
        e != 0x66 && e != 0x6e && e != 0x72 && e != 0x74
      ) return 0;
      p++;
      continue;
    }
    if (c < 0x20) return 0;
    p++;
  }
  return 0;
}

@inline
function isDigit(c: u32): bool {
  return c - 0x30 < 10;
}

// scanNumber checks the number starting at p and returns the address after it, or 0.
function scanNumber(p: usize, end: usize): usize {
  if (load<u8>(p) == 0x2d) {
    p++;
    if (p >= end) return 0;
  }
  let c = <u32>load<u8>(p);
  if (c == 0x30) {
    p++;
  } else if (c - 0x31 < 9) {
    p++;
    while (p < end && isDigit(load<u8>(p))) p++;
  } else {
    return 0;
  }
  if (p < end && load<u8>(p) == 0x2e) {
    p++;
    if (p >= end || !isDigit(load<u8>(p))) return 0;
    while (p < end && isDigit(load<u8>(p))) p++;
  }
  if (p < end && (load<u8>(p) | 0x20) == 0x65) {
    p++;
    if (p < end && (load<u8>(p) == 0x2b || load<u8>(p) == 0x2d)) p++;
    if (p >= end || !isDigit(load<u8>(p))) return 0;
    while (p < end && isDigit(load<u8>(p))) p++;
  }
  return p;
}

// scanLiteral checks true, false or null at p and returns the address after it, or 0.
@inline
function scanLiteral(p: usize, end: usize, c: u8): usize {
  const left = end - p;
  if (c == 0x74) return left >= 4 && load<u32>(p) == 0x65757274 ? p + 4 : 0; // true
  if (c == 0x6e) return left >= 4 && load<u32>(p) == 0x6c6c756e ? p + 4 : 0; // null
  return left >= 5 && load<u32>(p) == 0x736c6166 && load<u8>(p, 4) == 0x65 ? p + 5 : 0; // false
}

// scanKey checks a member key at p (a string, whitespace, a colon) and
// returns the address of the value that follows (whitespace skipped), or 0.
@inline
function scanKey(p: usize, end: usize): usize {
  if (p >= end || load<u8>(p) != QUOTE) return 0;
  p = scanString(p, end);
  if (p == 0) return 0;
  p = skipWs(p, end);
  if (p >= end || load<u8>(p) != COLON) return 0;
  return skipWs(p + 1, end);
}

@inline
function kindOfByte(c: u8): JsonKind {
  if (c == QUOTE) return JsonKind.String;
  if (c == LBRACE) return JsonKind.Object;
  if (c == LBRACKET) return JsonKind.Array;
  if (c == 0x74) return JsonKind.True;
  if (c == 0x66) return JsonKind.False;
  if (c == 0x6e) return JsonKind.Null;
  return JsonKind.Number;
}

/**
 * Checks the JSON value starting at p (no leading whitespace) inside
 * `depth` already open containers. Returns the address after the value, or
 * 0 when it is invalid; sets lastKind. Iterative: nesting costs one bit
 * of `stack`, not wasm stack.
 */
function scanValue(p: usize, end: usize, depth: i32): usize {
  if (p >= end) return 0;
  const first = load<u8>(p);
  const base = depth;
  while (true) {
    // A value starts at p.
    if (p >= end) return 0;
    const c = load<u8>(p);
    if (c == QUOTE) {
      p = scanString(p, end);
    } else if (c == LBRACE || c == LBRACKET) {
      if (depth >= JSON_MAX_DEPTH) return 0;
      const obj = c == LBRACE;
      const w = stack + (<usize>depth >> 3);
      const bit = <u8>(<i32>1 << (depth & 7));
      store<u8>(w, obj ? load<u8>(w) | bit : load<u8>(w) & ~bit);
      depth++;
      p = skipWs(p + 1, end);
      if (p >= end) return 0;
      const d = load<u8>(p);
      if (d == (obj ? RBRACE : RBRACKET)) {
        p++;
        depth--;
      } else {
        if (obj) p = scanKey(p, end);
        if (p == 0) return 0;
        continue; // the first member's value or the first element
      }
    } else if (c == 0x74 || c == 0x66 || c == 0x6e) {
      p = scanLiteral(p, end, c);
    } else {
      p = scanNumber(p, end);
    }
    if (p == 0) return 0;
    // After a value: close containers until another value is due.
    while (true) {
      if (depth == base) {
        lastKind = kindOfByte(first);
        return p;
      }
      p = skipWs(p, end);
      if (p >= end) return 0;
      const c2 = load<u8>(p);
      const d = depth - 1;
      const obj = (<i32>load<u8>(stack + (<usize>d >> 3)) >> (d & 7)) & 1;
      if (c2 == COMMA) {
        p = skipWs(p + 1, end);
        if (obj) p = scanKey(p, end);
        if (p == 0) return 0;
        break;
      }
      if (c2 == (obj ? RBRACE : RBRACKET)) {
        p++;
        depth--;
        continue;
      }
      return 0;
    }
  }
  return 0;
}

@inline
function hexValue(c: u8): i32 {
  const u = <u32>c;
  if (u - 0x30 < 10) return <i32>(u - 0x30);
  const l = u | 0x20;
  if (l - 0x61 < 6) return <i32>(l - 0x61 + 10);
  return -1;
}

// hex4 reads \uXXXX at p (p..p+6 within end), or returns -1.
function hex4(p: usize, end: usize): i32 {
  if (end - p < 6 || load<u8>(p) != BACKSLASH || load<u8>(p, 1) != 0x75) return -1;
  let v = 0;
  for (let k: usize = 2; k < 6; k++) {
    const h = hexValue(load<u8>(p + k));
    if (h < 0) return -1;
    v = (v << 4) | h;
  }
  return v;
}

// utf8Size returns the length of the valid UTF-8 sequence at p, or 0.
function utf8Size(p: usize, end: usize): i32 {
  const c = <u32>load<u8>(p);
  const left = end - p;
  let lo: u32 = 0x80;
  let hi: u32 = 0xbf;
  let n = 0;
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    else if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    else if (c == 0xf4) hi = 0x8f;
  } else return 0;
  if (left < <usize>n) return 0;
  const c1 = <u32>load<u8>(p, 1);
  if (c1 < lo || c1 > hi) return 0;
  for (let k = 2; k < n; k++) {
    const ck = <u32>load<u8>(p + <usize>k);
    if (ck < 0x80 || ck > 0xbf) return 0;
  }
  return n;
}

// putRune writes the UTF-8 encoding of r at o and returns its length.
function putRune(o: usize, r: u32): usize {
  if (r < 0x80) {
    store<u8>(o, r);
    return 1;
  }
  if (r < 0x800) {
    store<u8>(o, 0xc0 | (r >> 6));
    store<u8>(o, 0x80 | (r & 0x3f), 1);
    return 2;
  }
  if (r < 0x10000) {
    store<u8>(o, 0xe0 | (r >> 12));
    store<u8>(o, 0x80 | ((r >> 6) & 0x3f), 1);
    store<u8>(o, 0x80 | (r & 0x3f), 2);
    return 3;
  }
  store<u8>(o, 0xf0 | (r >> 18));
  store<u8>(o, 0x80 | ((r >> 12) & 0x3f), 1);
  store<u8>(o, 0x80 | ((r >> 6) & 0x3f), 2);
  store<u8>(o, 0x80 | (r & 0x3f), 3);
  return 4;
}

// unescape decodes the content of a valid JSON string [p, end) into out
// (at least 3 bytes per input byte) and returns the length written.
function unescape(p: usize, end: usize, out: usize): i32 {
  let o = out;
  while (p < end) {
    const c = <u32>load<u8>(p);
    if (c == BACKSLASH) {
      const e = <u32>load<u8>(p, 1);
      if (e == 0x75) {
        let r = <u32>hex4(p, end);
        p += 6;
        if (r >= 0xd800 && r < 0xe000) {
          const r2 = hex4(p, end);
          if (r < 0xdc00 && r2 >= 0xdc00 && r2 < 0xe000) {
            r = 0x10000 + (((r - 0xd800) << 10) | (<u32>r2 - 0xdc00));
            p += 6;
          } else {
            r = 0xfffd;
          }
        }
        o += putRune(o, r);
        continue;
      }
      let b = e;
      if (e == 0x62) b = 0x08;
      else if (e == 0x66) b = 0x0c;
      else if (e == 0x6e) b = 0x0a;
      else if (e == 0x72) b = 0x0d;
      else if (e == 0x74) b = 0x09;
      store<u8>(o++, b);
      p += 2;
      continue;
    }
    if (c < 0x80) {
      store<u8>(o++, c);
      p++;
      continue;
    }
    const n = utf8Size(p, end);
    if (n == 0) {
      o += putRune(o, 0xfffd);
      p++;
    } else {
      memory.copy(o, p, <usize>n);
      o += <usize>n;
      p += <usize>n;
    }
  }
  return <i32>(o - out);
}
