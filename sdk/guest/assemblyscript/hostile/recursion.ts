// recursion: rewind_filter recurses without bound, until the wasm stack
// is exhausted (a trap in the host).

import { OUTPUT } from "../assembly/rewind/runtime";
export * from "./lib/raw";

// Not a tail call (the + 1 after it), and the store keeps every frame real.
function down(n: i32): i32 {
  store<i32>(OUTPUT, n);
  return down(n + 1) + 1;
}

export function rewind_filter(count: i32, len: i32): i32 {
  return down(count);
}
