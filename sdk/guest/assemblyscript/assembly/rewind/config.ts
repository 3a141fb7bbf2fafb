// Config: typed reads of a module's JSON config in onInit.
//
// The rules follow what Go's encoding/json does when it decodes the same
// config into a struct, so that a Go module and an AssemblyScript module
// given one config agree: unknown fields are ignored, the last of repeated
// fields wins, null counts as absent, and a field of the wrong type
// rejects the config. (Unlike Go, names match the raw key bytes exactly:
// no case folding, no escapes in keys.) Reads allocate, which is fine in
// onInit and nowhere else.

import { Bytes } from "./bytes";
import { Json, JsonKind, JsonObject } from "./json";

/** A valid JSON object config, read field by field. */
@final
export class Config {
  /** Cleared by a read that found a field of the wrong type. */
  ok: bool = true;
  private readonly it: JsonObject = new JsonObject();
  private readonly raw: Bytes = new Bytes();

  private constructor(private readonly text: Bytes) {}

  /** The config in `text`, or null unless it is one valid JSON object. */
  static parse(text: Bytes): Config | null {
    return Json.isObject(text) ? new Config(text) : null;
  }

  /** Whether the field is present and not null. */
  has(name: string): bool {
    return this.find(name) != JsonKind.None;
  }

  /** The decoded string field, or null when absent (or of the wrong type: see ok). */
  string(name: string): Bytes | null {
    const k = this.find(name);
    if (k == JsonKind.None) return null;
    if (k != JsonKind.String) {
      this.ok = false;
      return null;
    }
    return Json.decodeString(this.raw);
  }

  /** The decoded string field, or the UTF-8 of `def` when absent. */
  stringOr(name: string, def: string): Bytes {
    const s = this.string(name);
    return s != null ? s : Bytes.fromString(def);
  }

  /** The integer field (an i64 without fraction or exponent), or `def` when absent. */
  integer(name: string, def: i64): i64 {
    const k = this.find(name);
    if (k == JsonKind.None) return def;
    if (k != JsonKind.Number || !Json.isInteger(this.raw)) {
      this.ok = false;
      return def;
    }
    return Json.integerValue(this.raw);
  }

  /** The array-of-strings field, decoded, or null when absent (or wrong: see ok). */
  stringArray(name: string): Array<Bytes> | null {
    const k = this.find(name);
    if (k == JsonKind.None) return null;
    const a = k == JsonKind.Array ? Json.stringArray(this.raw) : null;
    if (a == null) this.ok = false;
    return a;
  }

  // find points raw at the value of the last member named name and returns
  // its kind, or None when there is none or it is null.
  private find(name: string): JsonKind {
    const it = this.it;
    let kind = JsonKind.None;
    it.reset(this.text);
    while (it.next()) {
      if (it.key.equalsString(name)) {
        kind = it.kind == JsonKind.Null ? JsonKind.None : it.kind;
        this.raw.setFrom(it.value);
      }
    }
    return kind;
  }
}
