// failat: keeps every record until the one at offset `offset` (config
// {"offset":N}), on which it aborts: a filter that fails in the middle of
// a replay, for resume tests.
import { Bytes, Config, Record, onInit, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

let at: u64 = 0;

onInit((config: Bytes): bool => {
  const c = Config.parse(config);
  if (c == null) return false;
  at = <u64>c.integer("offset", 0);
  return c.ok;
});

setFilter((r: Record): bool => {
  if (r.offset == at) abort("failat: reached the failing offset");
  return true;
});
