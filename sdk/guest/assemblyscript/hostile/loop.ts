// loop: rewind_filter never returns. The host must stop it (context
// deadline / fuel) and fail the replay.

import { OUTPUT } from "../assembly/rewind/runtime";
export * from "./lib/raw";

export function rewind_filter(count: i32, len: i32): i32 {
  // The store is a side effect the optimiser must keep, so the loop stays.
  let i: u32 = <u32>count;
  while (true) {
    store<u32>(OUTPUT, i);
    i = i * 1664525 + 1013904223;
  }
  return 0;
}
