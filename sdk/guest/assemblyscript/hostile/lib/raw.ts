// The ABI v1 exports a hand-written hostile module shares: the marker, the
// SDK's buffers and an init that accepts any config. The module itself
// exports rewind_filter. (In a subdirectory: build.mjs compiles only the
// files directly in hostile/.)
export {
  rewind_abi_v1,
  rewind_input,
  rewind_input_cap,
  rewind_output,
  rewind_output_cap,
} from "../../assembly/rewind/abi";

export function rewind_init(configLen: i32): i32 {
  return 0;
}
