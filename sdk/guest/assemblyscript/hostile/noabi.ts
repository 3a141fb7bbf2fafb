// noabi: a working filter without any ABI marker export. Refused at upload.

import { Record, setFilter } from "../assembly/rewind/index";
export {
  rewind_input,
  rewind_input_cap,
  rewind_output,
  rewind_output_cap,
  rewind_init,
  rewind_filter,
} from "../assembly/rewind/abi";

setFilter((r: Record): bool => true);
