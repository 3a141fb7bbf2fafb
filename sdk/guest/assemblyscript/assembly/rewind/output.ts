// Output: writes the outputs of one rewind_filter call straight into the
// output buffer (ABI v1: u32 input_index, u8 action, then for action 1 the
// replacement key, value and headers).
//
// A transform gets the SDK's single Output together with each record. It
// may write nothing (drop), keep() (deliver unchanged), or one or more
// replacements, each built in order: key, value, headers.
//
//   out.replaceValue(v)                      // key and headers unchanged
//   out.replace(k, v)                        // headers unchanged
//   out.begin(); out.field(r.key);           // piece by piece
//   out.openField(); out.append(a); out.appendByte(0x2c); out.closeField();
//   out.sameHeaders();                       // or openHeaders/header/closeHeaders
//
// When a write does not fit, the Output stops writing and rewind_filter
// returns -2 so that the host retries with fewer records. Using the builder
// out of order makes rewind_filter return -1 and logs what went wrong.

import { Bytes } from "./bytes";
import { Record } from "./record";

// What the builder expects next.
const IDLE: i32 = 0;
const KEY: i32 = 1;
const VALUE: i32 = 2;
const HEADERS: i32 = 3;
const IN_FIELD: i32 = 4;
const IN_HEADERS: i32 = 5;

/** The writer of outputs for the current call. */
@final
export class Output {
  private base: usize = 0;
  private cap: usize = 0;
  private pos: usize = 0;
  private rec: Record | null = null;
  private state: i32 = IDLE;
  // The part that follows the open field (VALUE after a key, HEADERS after a value).
  private after: i32 = IDLE;
  // Address of the u32 length (or header count) of the open field, or 0 after overflow.
  private mark: usize = 0;
  private count: u32 = 0;

  /** Set when a write did not fit; the call then returns -2. */
  overflow: bool = false;
  /** Set when the builder was used out of order; the call then returns -1. */
  misuse: string | null = null;

  /** Number of bytes written so far in this call. */
  @inline
  get length(): i32 {
    return <i32>this.pos;
  }

  /** Starts a call: the buffer at base holds cap bytes. (Called by the SDK.) */
  start(base: usize, cap: usize): void {
    this.base = base;
    this.cap = cap;
    this.pos = 0;
    this.state = IDLE;
    this.overflow = false;
    this.misuse = null;
  }

  /** Makes r the record outputs refer to. (Called by the SDK.) */
  @inline
  select(r: Record): void {
    this.rec = r;
  }

  /** Whether the last output is complete. (Checked by the SDK after each record.) */
  @inline
  get idle(): bool {
    return this.state == IDLE;
  }

  /** Delivers the current record unchanged (action 0). */
  keep(): void {
    if (!this.expect(IDLE, "keep inside a replacement")) return;
    const p = this.reserve(5);
    if (p == 0) return;
    store<u32>(p, this.rec!.index);
    store<u8>(p, 0, 4);
  }

  /** Delivers a replacement with the record's key and headers and this value. */
  replaceValue(value: Bytes): void {
    this.begin();
    this.field(this.rec!.key);
    this.field(value);
    this.sameHeaders();
  }

  /** Delivers a replacement with this key and value and the record's headers. */
  replace(key: Bytes, value: Bytes): void {
    this.begin();
    this.field(key);
    this.field(value);
    this.sameHeaders();
  }

  /** Starts a replacement (action 1); next come the key, the value, the headers. */
  begin(): void {
    if (!this.expect(IDLE, "begin inside a replacement")) return;
    this.state = KEY;
    const p = this.reserve(5);
    if (p == 0) return;
    store<u32>(p, this.rec!.index);
    store<u8>(p, 1, 4);
  }

  /** Writes the key or the value (whichever is next) whole. */
  field(b: Bytes): void {
    this.openField();
    this.append(b);
    this.closeField();
  }

  /** Opens the key or the value (whichever is next) for append calls. */
  openField(): void {
    const s = this.state;
    if (s != KEY && s != VALUE) {
      this.fail("field where none is expected");
      return;
    }
    this.after = s + 1;
    this.state = IN_FIELD;
    this.mark = this.reserve(4);
  }

  /** Appends the bytes of b to the open field. */
  @inline
  append(b: Bytes): void {
    this.appendRaw(b.ptr, b.len);
  }

  /** Appends n bytes at ptr to the open field. */
  appendRaw(ptr: usize, n: i32): void {
    if (this.state != IN_FIELD) {
      this.fail("append outside a field");
      return;
    }
    const p = this.reserve(<usize>n);
    if (p != 0) memory.copy(p, ptr, <usize>n);
  }

  /** Appends one byte to the open field. */
  appendByte(c: u8): void {
    if (this.state != IN_FIELD) {
      this.fail("append outside a field");
      return;
    }
    const p = this.reserve(1);
    if (p != 0) store<u8>(p, c);
  }

  /** Closes the open field, writing its length. */
  closeField(): void {
    if (!this.expect(IN_FIELD, "closeField without openField")) return;
    this.state = this.after;
    const m = this.mark;
    if (m != 0 && !this.overflow) store<u32>(m, <u32>(this.base + this.pos - m - 4));
  }

  /** Writes the current record's headers, unchanged, as the headers part. */
  sameHeaders(): void {
    if (!this.expect(HEADERS, "headers before key and value")) return;
    this.state = IDLE;
    const r = this.rec!;
    const p = this.reserve(<usize>r.headersLen);
    if (p != 0) memory.copy(p, r.headersPtr, <usize>r.headersLen);
  }

  /** Opens the headers part for header calls. */
  openHeaders(): void {
    if (!this.expect(HEADERS, "headers before key and value")) return;
    this.state = IN_HEADERS;
    this.count = 0;
    this.mark = this.reserve(4);
  }

  /** Appends one header to the open headers part. */
  header(key: Bytes, value: Bytes): void {
    if (!this.expect(IN_HEADERS, "header outside openHeaders")) return;
    this.count++;
    const p = this.reserve(8 + <usize>key.len + <usize>value.len);
    if (p == 0) return;
    store<u32>(p, key.len);
    memory.copy(p + 4, key.ptr, <usize>key.len);
    const q = p + 4 + <usize>key.len;
    store<u32>(q, value.len);
    memory.copy(q + 4, value.ptr, <usize>value.len);
  }

  /** Closes the headers part, writing the header count; the replacement is done. */
  closeHeaders(): void {
    if (!this.expect(IN_HEADERS, "closeHeaders without openHeaders")) return;
    this.state = IDLE;
    const m = this.mark;
    if (m != 0 && !this.overflow) store<u32>(m, this.count);
  }

  // reserve returns the address of n free bytes and advances past them, or
  // 0 (and sets overflow) when they do not fit.
  @inline
  private reserve(n: usize): usize {
    if (this.overflow) return 0;
    const pos = this.pos;
    if (n > this.cap - pos) {
      this.overflow = true;
      return 0;
    }
    this.pos = pos + n;
    return this.base + pos;
  }

  @inline
  private expect(state: i32, what: string): bool {
    if (this.state == state) return true;
    this.fail(what);
    return false;
  }

  private fail(what: string): void {
    if (this.misuse == null) this.misuse = what;
  }
}
