// badaction: outputs action 7 for the first record (only 0 and 1 exist).

import { OUTPUT } from "../assembly/rewind/runtime";
export * from "./lib/raw";

export function rewind_filter(count: i32, len: i32): i32 {
  store<u32>(OUTPUT, 0);
  store<u8>(OUTPUT, 7, 4);
  return 5;
}
