// socket: imports wasi_snapshot_preview1.sock_accept, which is not on the
// allow-list, and calls it from rewind_filter. Refused at upload.

import { OUTPUT } from "../assembly/rewind/runtime";
import { Record, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "sock_accept")
declare function sock_accept(fd: i32, flags: i32, accepted: usize): i32;

setFilter((r: Record): bool => sock_accept(3, 0, OUTPUT) == 0);
