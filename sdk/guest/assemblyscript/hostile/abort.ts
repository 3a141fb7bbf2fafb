// abort: rewind_filter calls env.abort (AssemblyScript's), a trap.

import { Record, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

setFilter((r: Record): bool => {
  abort("hostile: abort in rewind_filter");
  return true;
});
