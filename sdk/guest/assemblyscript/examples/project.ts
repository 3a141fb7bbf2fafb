// project keeps only some top-level fields of JSON values: the value becomes
// '{', the members whose raw key is listed, in input order, each as
// "key":value with the raw bytes of the input, joined by ',', then '}'. A
// value that is not a valid JSON object drops the record. Key and headers
// are kept. The twin of sdk/guest/examples/go/project.
//
// Config: {"fields":["id","type"]}, a required array of strings.
import { Bytes, Config, Json, JsonObject, Output, Record, log, onInit, setTransform } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

let fields: Array<Bytes> = [];
const it = new JsonObject();

onInit((config: Bytes): bool => {
  const c = Config.parse(config);
  if (c == null) {
    log('project: config must be a JSON object like {"fields":["id","type"]}');
    return false;
  }
  const f = c.stringArray("fields");
  if (!c.ok) {
    log('project: "fields" must be a JSON array of strings');
    return false;
  }
  if (f == null) {
    log('project: config needs "fields"');
    return false;
  }
  fields = f;
  return true;
});

function listed(key: Bytes): bool {
  for (let i = 0; i < fields.length; i++) {
    if (unchecked(fields[i]).equals(key)) return true;
  }
  return false;
}

setTransform((r: Record, out: Output): void => {
  const v = r.value;
  if (!Json.isObject(v)) return; // dropped
  out.begin();
  out.field(r.key);
  out.openField();
  out.appendByte(0x7b);
  let first = true;
  it.reset(v);
  while (it.next()) {
    if (!listed(it.key)) continue;
    if (!first) out.appendByte(0x2c);
    first = false;
    out.appendByte(0x22);
    out.append(it.key);
    out.appendByte(0x22);
    out.appendByte(0x3a);
    out.append(it.value);
  }
  out.appendByte(0x7d);
  out.closeField();
  out.sameHeaders();
});
