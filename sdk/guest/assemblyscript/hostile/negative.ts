// negative: rewind_filter reports a guest failure (-1).

export * from "./lib/raw";

export function rewind_filter(count: i32, len: i32): i32 {
  return -1;
}
