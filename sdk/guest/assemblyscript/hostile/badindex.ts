// badindex: outputs input_index == count, one past the last record.

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
  store<u32>(OUTPUT, count);
  store<u8>(OUTPUT, 0, 4);
  return 5;
}
