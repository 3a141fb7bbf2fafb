// keyprefix keeps the records whose key starts with a prefix, compared byte
// for byte. The twin of sdk/guest/examples/go/keyprefix: same config, same
// outputs, byte for byte.
//
// Config: {"prefix":"user-1"} ("prefix" a required string; an empty prefix
// keeps every record). Configs are read as Go's encoding/json reads them
// into a struct: unknown fields ignored, the last repeat wins, null is
// absent, a wrong type fails rewind_init.
import { Bytes, Config, Record, log, onInit, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

let prefix = new Bytes();

onInit((config: Bytes): bool => {
  const c = Config.parse(config);
  if (c == null) {
    log('keyprefix: config must be a JSON object like {"prefix":"user-1"}');
    return false;
  }
  const p = c.string("prefix");
  if (!c.ok) {
    log('keyprefix: "prefix" must be a JSON string');
    return false;
  }
  if (p == null) {
    log('keyprefix: config needs "prefix"');
    return false;
  }
  prefix = p;
  return true;
});

setFilter((r: Record): bool => r.key.startsWith(prefix));
