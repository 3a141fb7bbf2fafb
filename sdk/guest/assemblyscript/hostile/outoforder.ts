// outoforder: outputs input index 1 and then 0 (input_index must not
// decrease). Meant to be called with at least two records.

import { OUTPUT } from "../assembly/rewind/runtime";
export * from "./lib/raw";

export function rewind_filter(count: i32, len: i32): i32 {
  store<u32>(OUTPUT, 1);
  store<u8>(OUTPUT, 0, 4);
  store<u32>(OUTPUT, 0, 5);
  store<u8>(OUTPUT, 0, 9);
  return 10;
}
