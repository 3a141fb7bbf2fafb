// pathopen: imports wasi_snapshot_preview1.path_open, which is not on the
// allow-list, and calls it from rewind_filter to open "/etc/passwd" from
// descriptor 3. Refused at upload.

import { OUTPUT } from "../assembly/rewind/runtime";
import { Record, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "path_open")
declare function path_open(
  fd: i32,
  dirflags: i32,
  path: usize,
  pathLen: i32,
  oflags: i32,
  rightsBase: u64,
  rightsInheriting: u64,
  fdflags: i32,
  opened: usize,
): i32;

const path = memory.data<u8>([0x2f, 0x65, 0x74, 0x63, 0x2f, 0x70, 0x61, 0x73, 0x73, 0x77, 0x64]);

setFilter((r: Record): bool => path_open(3, 0, path, 11, 0, 2, 2, 0, OUTPUT) == 0);
