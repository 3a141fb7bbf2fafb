// logflood: logs 5,000 lines of 8 KiB for every record, then keeps it.

import { Bytes, Record, logBytes, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

const LINE: i32 = 8 << 10;
const line = new Bytes(memory.data(LINE), LINE);
memory.fill(line.ptr, 0x78, <usize>LINE); // 'x'

setFilter((r: Record): bool => {
  for (let i = 0; i < 5000; i++) {
    store<u8>(line.ptr, 0x30 + <u8>(i % 10)); // vary the line a little
    logBytes(line);
  }
  return true;
});
