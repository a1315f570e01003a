import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { inspectAdapter } from "./adapter-files.ts";

const root = mkdtempSync(join(tmpdir(), "bridle-adapter-files-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A minimal but well-formed safetensors file with one LoRA A and one LoRA B tensor. */
function safetensors(): Buffer {
  const header = JSON.stringify({
    "x.lora_A.weight": { dtype: "F32", shape: [1, 1], data_offsets: [0, 4] },
    "x.lora_B.weight": { dtype: "F32", shape: [1, 1], data_offsets: [4, 8] },
  });
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(header.length));
  return Buffer.concat([length, Buffer.from(header), Buffer.alloc(8)]);
}

function adapter(name: string, config: unknown, weights = safetensors()): string {
  const dir = join(root, name);
  mkdirSync(dir);
  writeFileSync(
    join(dir, "adapter_config.json"),
    typeof config === "string" ? config : JSON.stringify(config),
  );
  writeFileSync(join(dir, "adapter_model.safetensors"), weights);
  return dir;
}

describe("adapter directories are checked before the model server sees them", () => {
  it("hashes a good adapter, and the hash follows the content", () => {
    const a = inspectAdapter(adapter("good", { r: 8 }), 16);
    const b = inspectAdapter(adapter("other", { r: 4 }), 16);
    expect(a.rank).toBe(8);
    expect(a.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(a.hash).not.toBe(b.hash);
  });

  it.each([
    ["missing", () => join(root, "nope"), /has no adapter_config.json/],
    ["bad JSON", () => adapter("badjson", "{r: 8"), /not valid JSON/],
    ["rank too large", () => adapter("rank", { r: 32 }), /exceeds the server's --max-lora-rank 16/],
    [
      "truncated weights",
      () => adapter("trunc", { r: 8 }, safetensors().subarray(0, 40)),
      /truncated or corrupt/,
    ],
    [
      "garbage weights",
      () => adapter("garbage", { r: 8 }, Buffer.from("not a tensor file at all")),
      /corrupt/,
    ],
    ["modules_to_save", () => adapter("mts", { r: 8, modules_to_save: ["lm_head"] }), /modules_to_save/],
  ])("rejects %s with a message naming the problem", (_label, make, pattern) => {
    expect(() => inspectAdapter(make(), 16)).toThrow(pattern);
  });
});
