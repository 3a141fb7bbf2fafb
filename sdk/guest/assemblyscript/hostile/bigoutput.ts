// bigoutput: claims more output bytes than the output buffer holds.

import { OUTPUT_CAP } from "../assembly/rewind/runtime";
export * from "./lib/raw";

export function rewind_filter(count: i32, len: i32): i32 {
  return OUTPUT_CAP + 4096;
}
