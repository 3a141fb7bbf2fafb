// slow: finite but heavy: about 10^7 simple operations (2 million rounds of
// xorshift32) per record before keeping it.

import { OUTPUT } from "../assembly/rewind/runtime";
import { Record, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

const ROUNDS: i32 = 2_000_000;
// Where the hash goes; a store the optimiser cannot drop. Past the outputs
// a filter writes (5 bytes per record, at most 1024 records per call).
const SINK: usize = OUTPUT + (1 << 20);

setFilter((r: Record): bool => {
  let h = <u32>r.offset | 1;
  for (let i = 0; i < ROUNDS; i++) {
    h ^= h << 13;
    h ^= h >> 17;
    h ^= h << 5;
  }
  store<u32>(SINK, h);
  return true;
});
