import { createHash } from "node:crypto";
import type { TaskSplit } from "@bridle/contracts";

/**
 * The split of a task: held-out when the first 32 bits of sha256(id), as a fraction, fall below
 * `heldOutRatio`. Deterministic, so a task keeps its split across imports and machines.
 */
export function splitFor(id: string, heldOutRatio: number, override?: TaskSplit): TaskSplit {
  if (override) return override;
  const fraction = createHash("sha256").update(id).digest().readUInt32BE(0) / 2 ** 32;
  return fraction < heldOutRatio ? "held-out" : "train";
}
