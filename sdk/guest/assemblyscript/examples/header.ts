// header keeps the records carrying a header with exactly the given key and
// value (any of them, when the key repeats). The twin of
// sdk/guest/examples/go/header.
//
// Config: {"header":"source","equals":"web"}, both required strings.
import { Bytes, Config, Record, log, onInit, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

let header = new Bytes();
let equals = new Bytes();

onInit((config: Bytes): bool => {
  const c = Config.parse(config);
  if (c == null) {
    log('header: config must be a JSON object like {"header":"source","equals":"web"}');
    return false;
  }
  const h = c.string("header");
  const e = c.string("equals");
  if (!c.ok) {
    log('header: "header" and "equals" must be JSON strings');
    return false;
  }
  if (h == null || e == null) {
    log('header: config needs "header" and "equals"');
    return false;
  }
  header = h;
  equals = e;
  return true;
});

setFilter((r: Record): bool => r.hasHeader(header, equals));
