// initfail: rewind_init returns 1 (the config reader rejects any config).

import { Bytes, Record, onInit, setFilter } from "../assembly/rewind/index";
export * from "../assembly/rewind/abi";

onInit((config: Bytes): bool => false);
setFilter((r: Record): bool => true);
