// redact replaces the raw value of every top-level member with the raw key
// `field` (whatever its JSON type) by `with` as a JSON string (only '"' and
// '\' escaped). A value that is not a valid JSON object drops the record; an
// object without the field is delivered unchanged. Key and headers are
// kept. The twin of sdk/guest/examples/go/redact.
//
// Config: {"field":"email","with":"***"}; "with" is optional.
import { Bytes, Config, JsonObject, Output, Record, log, onInit, setTransform } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

let field = new Bytes();
let replacement = new Bytes();
let replacementBuf = new Uint8Array(0); // keeps replacement's bytes alive
const it = new JsonObject();

onInit((config: Bytes): bool => {
  const c = Config.parse(config);
  if (c == null) {
    log('redact: config must be a JSON object like {"field":"email","with":"***"}');
    return false;
  }
  const f = c.string("field");
  const w = c.stringOr("with", "***");
  if (!c.ok) {
    log('redact: "field" and "with" must be JSON strings');
    return false;
  }
  if (f == null) {
    log('redact: config needs "field"');
    return false;
  }
  field = f;
  let n = 2;
  for (let i = 0; i < w.len; i++) {
    const b = w.at(i);
    n += b == 0x22 || b == 0x5c ? 2 : 1;
  }
  replacementBuf = new Uint8Array(n);
  let o = 0;
  replacementBuf[o++] = 0x22;
  for (let i = 0; i < w.len; i++) {
    const b = w.at(i);
    if (b == 0x22 || b == 0x5c) replacementBuf[o++] = 0x5c;
    replacementBuf[o++] = b;
  }
  replacementBuf[o++] = 0x22;
  replacement = new Bytes(replacementBuf.dataStart, n);
  return true;
});

setTransform((r: Record, out: Output): void => {
  const v = r.value;
  let hits = 0;
  it.reset(v);
  while (it.next()) {
    if (it.key.equals(field)) hits++;
  }
  if (!it.valid) return; // dropped
  if (hits == 0) {
    out.keep();
    return;
  }
  out.begin();
  out.field(r.key);
  out.openField();
  let from = v.ptr;
  it.reset(v);
  while (it.next()) {
    if (!it.key.equals(field)) continue;
    out.appendRaw(from, <i32>(it.value.ptr - from));
    out.append(replacement);
    from = it.value.ptr + <usize>it.value.len;
  }
  out.appendRaw(from, <i32>(v.ptr + <usize>v.len - from));
  out.closeField();
  out.sameHeaders();
});
