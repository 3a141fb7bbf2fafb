// jsonfield keeps the records whose value is a valid JSON object whose first
// top-level member with the raw key `field` is a string whose raw content
// (between the quotes, escapes not processed) equals `equals`. Anything else
// (not an object, invalid JSON anywhere, field missing or of another type)
// is dropped. The twin of sdk/guest/examples/go/jsonfield.
//
// Config: {"field":"type","equals":"order.created"}, both required strings.
import { Bytes, Config, Json, JsonKind, Record, log, onInit, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

let field = new Bytes();
let equals = new Bytes();
const raw = new Bytes();
const content = new Bytes();

onInit((config: Bytes): bool => {
  const c = Config.parse(config);
  if (c == null) {
    log('jsonfield: config must be a JSON object like {"field":"type","equals":"order.created"}');
    return false;
  }
  const f = c.string("field");
  const e = c.string("equals");
  if (!c.ok) {
    log('jsonfield: "field" and "equals" must be JSON strings');
    return false;
  }
  if (f == null || e == null) {
    log('jsonfield: config needs "field" and "equals"');
    return false;
  }
  field = f;
  equals = e;
  return true;
});

setFilter(
  (r: Record): bool =>
    Json.field(r.value, field, raw) == JsonKind.String && Json.stringContent(raw, content) && content.equals(equals),
);
