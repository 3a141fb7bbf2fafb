// membomb: rewind_filter grows memory until memory.grow fails (the host's
// limit), writes to every page it got, then aborts.

export * from "./lib/raw";

export function rewind_filter(count: i32, len: i32): i32 {
  while (memory.grow(16) >= 0) {}
  // Touch the last byte of every page, so the pages are really used.
  const pages = memory.size();
  for (let i = 0; i < pages; i++) {
    const p = (<usize>i << 16) + 0xffff;
    store<u8>(p, load<u8>(p) + 1);
  }
  abort("membomb: memory exhausted");
  return 0;
}
