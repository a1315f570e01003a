import { createHash } from "node:crypto";
import { closeSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { join } from "node:path";

const FILES = ["adapter_config.json", "adapter_model.safetensors"] as const;

/** A PEFT adapter directory that cannot be served; the message says what is wrong with it. */
export class InvalidAdapterError extends Error {
  override name = "InvalidAdapterError";
}

/** Reads the safetensors header and checks that the file holds every tensor it declares. */
function checkSafetensors(file: string): number {
  const size = statSync(file).size;
  if (size < 8) throw new InvalidAdapterError(`${file} is ${size} bytes: not a safetensors file`);
  const fd = openSync(file, "r");
  try {
    const prefix = Buffer.alloc(8);
    readSync(fd, prefix, 0, 8, 0);
    const headerLength = Number(prefix.readBigUInt64LE());
    if (headerLength <= 0 || 8 + headerLength > size) {
      throw new InvalidAdapterError(
        `${file} has a header length of ${headerLength} in ${size} bytes: truncated or corrupt`,
      );
    }
    const header = Buffer.alloc(headerLength);
    readSync(fd, header, 0, headerLength, 8);
    let tensors: Record<string, { data_offsets?: [number, number] }>;
    try {
      tensors = JSON.parse(header.toString("utf8"));
    } catch {
      throw new InvalidAdapterError(`${file} has a header that is not JSON: corrupt`);
    }
    const names = Object.keys(tensors).filter((k) => k !== "__metadata__");
    const end = Math.max(0, ...names.map((k) => tensors[k]?.data_offsets?.[1] ?? 0));
    if (8 + headerLength + end !== size) {
      throw new InvalidAdapterError(
        `${file} declares ${end} bytes of tensors but holds ${size - 8 - headerLength}: truncated or corrupt`,
      );
    }
    if (!names.some((k) => k.includes("lora_A")) || !names.some((k) => k.includes("lora_B"))) {
      throw new InvalidAdapterError(`${file} holds no LoRA A/B tensors`);
    }
    return names.length;
  } finally {
    closeSync(fd);
  }
}

/**
 * Checks a PEFT adapter directory before the model server sees it, so that a bad directory is a clear
 * 422 instead of a vLLM stack trace, and returns its content hash (sha256 over the two files, each
 * as name, NUL, bytes, NUL: the trainer computes the same).
 */
export function inspectAdapter(dir: string, maxRank: number): { hash: string; rank: number } {
  for (const file of FILES) {
    try {
      statSync(join(dir, file));
    } catch {
      throw new InvalidAdapterError(`${dir} has no ${file}`);
    }
  }
  let config: Record<string, unknown>;
  try {
    config = JSON.parse(readFileSync(join(dir, FILES[0]), "utf8"));
  } catch (err) {
    throw new InvalidAdapterError(`${dir}/${FILES[0]} is not valid JSON (${(err as Error).message})`);
  }
  const rank = config.r;
  if (typeof rank !== "number" || !Number.isInteger(rank) || rank < 1) {
    throw new InvalidAdapterError(`${dir}/${FILES[0]} has no valid rank "r"`);
  }
  if (rank > maxRank)
    throw new InvalidAdapterError(`adapter rank ${rank} exceeds the server's --max-lora-rank ${maxRank}`);
  if (config.use_dora === true) throw new InvalidAdapterError("DoRA adapters are not servable");
  if (Array.isArray(config.modules_to_save) && config.modules_to_save.length > 0) {
    throw new InvalidAdapterError("adapters with modules_to_save are not servable");
  }
  checkSafetensors(join(dir, FILES[1]));
  const digest = createHash("sha256");
  for (const file of FILES) {
    digest.update(`${file}\0`);
    digest.update(readFileSync(join(dir, file)));
    digest.update("\0");
  }
  return { hash: digest.digest("hex"), rank };
}
