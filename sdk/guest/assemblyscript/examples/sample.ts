// sample keeps one record in n by offset: those whose offset % n == 0, the
// same however records are batched and wherever a replay starts. The twin
// of sdk/guest/examples/go/sample.
//
// Config: {"n":10}, a required integer from 1 to 2^63-1.
import { Bytes, Config, Record, log, onInit, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

let n: u64 = 1;

onInit((config: Bytes): bool => {
  const c = Config.parse(config);
  if (c == null) {
    log('sample: config must be a JSON object like {"n":10}');
    return false;
  }
  const v = c.integer("n", 0);
  if (!c.ok || v < 0 || (v == 0 && c.has("n"))) {
    log('sample: "n" must be an integer from 1 to 2^63-1');
    return false;
  }
  if (v == 0) {
    log('sample: config needs "n"');
    return false;
  }
  n = <u64>v;
  return true;
});

setFilter((r: Record): bool => r.offset % n == 0);
