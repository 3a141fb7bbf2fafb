// amplify: writes 32 outputs (action 0) for every input record, more than
// the host's max_outputs_per_input (16).

import { OUTPUT, OUTPUT_CAP } from "../assembly/rewind/runtime";
export * from "./lib/raw";

export function rewind_filter(count: i32, len: i32): i32 {
  let o: usize = 0;
  for (let i = 0; i < count; i++) {
    for (let k = 0; k < 32; k++) {
      if (o + 5 > <usize>OUTPUT_CAP) return -2;
      store<u32>(OUTPUT + o, i);
      store<u8>(OUTPUT + o, 0, 4);
      o += 5;
    }
  }
  return <i32>o;
}
