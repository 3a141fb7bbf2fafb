// The exports of ABI v1 (sdk/guest/ABI.md). A module's entry file
// re-exports them with
//
//   export * from "../assembly/rewind/abi";
//
// AssemblyScript turns the exports of the entry file, and only those, into
// wasm exports, so this file exports nothing else.

import { INPUT, INPUT_CAP, OUTPUT, OUTPUT_CAP, runInit, runFilter } from "./runtime";

/** Marker: this module speaks ABI version 1. Never called. */
export function rewind_abi_v1(): void {}

/** Address of the input buffer. */
export function rewind_input(): usize {
  return INPUT;
}

/** Size of the input buffer in bytes. */
export function rewind_input_cap(): i32 {
  return INPUT_CAP;
}

/** Address of the output buffer. */
export function rewind_output(): usize {
  return OUTPUT;
}

/** Size of the output buffer in bytes. */
export function rewind_output_cap(): i32 {
  return OUTPUT_CAP;
}

/** Reads the config in input[0:configLen]; 0 = ok. */
export function rewind_init(configLen: i32): i32 {
  return runInit(configLen);
}

/** Processes count records in input[0:len]; returns output bytes, or -1 / -2. */
export function rewind_filter(count: i32, len: i32): i32 {
  return runFilter(count, len);
}
