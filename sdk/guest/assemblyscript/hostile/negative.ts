// negative: rewind_filter reports a guest failure (-1).

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
  return -1;
}
