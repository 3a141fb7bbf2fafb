// The Rewind guest SDK for AssemblyScript (ABI v1). See ../../README.md.
//
// A module's entry file imports what it needs from here, registers its
// handlers at top level, and re-exports the ABI:
//
//   import { Record, setFilter } from "../assembly/rewind";
//   export * from "../assembly/rewind/abi";
//   setFilter((r: Record): bool => r.offset % 2 == 0);

export { Bytes, memEqual } from "./bytes";
export { Config } from "./config";
export { Record, HeaderIterator } from "./record";
export { Output } from "./output";
export { Json, JsonArray, JsonKind, JsonObject, JSON_INVALID, JSON_MAX_DEPTH, JSON_MISSING } from "./json";
export {
  FilterFn,
  InitFn,
  INPUT_CAP,
  OUTPUT_CAP,
  TransformFn,
  fail,
  log,
  logBytes,
  onInit,
  setFilter,
  setTransform,
} from "./runtime";
