// wrongabi: a working filter that exports the marker rewind_abi_v2 instead
// of rewind_abi_v1. Refused at upload.

import { Record, setFilter } from "../assembly/rewind/index";
export {
  rewind_input,
  rewind_input_cap,
  rewind_output,
  rewind_output_cap,
  rewind_init,
  rewind_filter,
} from "../assembly/rewind/abi";

export function rewind_abi_v2(): void {}

setFilter((r: Record): bool => true);
