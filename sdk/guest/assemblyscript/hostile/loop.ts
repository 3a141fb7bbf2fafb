// loop: rewind_filter never returns. The host must stop it (context
// deadline / fuel) and fail the replay.

import { OUTPUT } from "../assembly/rewind/runtime";
export {
  rewind_abi_v1,
  rewind_input,
  rewind_input_cap,
  rewind_output,
  rewind_output_cap,
} from "../assembly/rewind/abi";

export function rewind_init(configLen: i32): i32 {
  return 0;
}

export function rewind_filter(count: i32, len: i32): i32 {
  // The store is a side effect the optimiser must keep, so the loop stays.
  let i: u32 = <u32>count;
  while (true) {
    store<u32>(OUTPUT, i);
    i = i * 1664525 + 1013904223;
  }
  return 0;
}
