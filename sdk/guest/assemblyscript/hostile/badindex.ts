// badindex: outputs input_index == count, one past the last record.

import { OUTPUT } from "../assembly/rewind/runtime";
export * from "./lib/raw";

export function rewind_filter(count: i32, len: i32): i32 {
  store<u32>(OUTPUT, count);
  store<u8>(OUTPUT, 0, 4);
  return 5;
}
