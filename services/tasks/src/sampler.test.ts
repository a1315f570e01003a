import type { TaskCategory } from "@bridle/contracts";
import { describe, expect, it } from "vitest";
import { epochOrder, type Sampleable, sampleBatch } from "./sampler.ts";

const tasks: Sampleable[] = (
  [
    ["build", 8],
    ["repair", 8],
    ["extend", 4],
    ["qa", 4],
  ] as [TaskCategory, number][]
).flatMap(([category, n]) =>
  Array.from({ length: n }, (_, i) => ({ id: `${category}-${i}`, category, hash: "h" })),
);

describe("stratified sampling", () => {
  it("is the same for the same seed and differs between seeds", () => {
    expect(sampleBatch(tasks, 6, 42, 0)).toEqual(sampleBatch(tasks, 6, 42, 0));
    expect(sampleBatch(tasks, 6, 42, 0).tasks).not.toEqual(sampleBatch(tasks, 6, 43, 0).tasks);
  });

  it("never repeats a task within an epoch, across batches", () => {
    const seen: string[] = [];
    let cursor = 0;
    for (let batch = 0; batch < 4; batch++) {
      const result = sampleBatch(tasks, 6, 7, cursor);
      seen.push(...result.tasks.map((t) => t.id));
      cursor = result.nextCursor;
      expect(result.tasks.every((t) => t.epoch === 0)).toBe(true);
    }
    expect(new Set(seen).size).toBe(24);
    const next = sampleBatch(tasks, 6, 7, cursor);
    expect(next.tasks.every((t) => t.epoch === 1)).toBe(true);
  });

  it("keeps each category near its share in every batch", () => {
    for (let cursor = 0; cursor < 24; cursor += 6) {
      const counts: Record<string, number> = {};
      for (const t of sampleBatch(tasks, 6, 99, cursor).tasks)
        counts[t.category] = (counts[t.category] ?? 0) + 1;
      // Shares of a batch of 6: build 2, repair 2, extend 1, qa 1; each may be off by one.
      expect(Math.abs((counts.build ?? 0) - 2)).toBeLessThanOrEqual(1);
      expect(Math.abs((counts.repair ?? 0) - 2)).toBeLessThanOrEqual(1);
      expect(Math.abs((counts.extend ?? 0) - 1)).toBeLessThanOrEqual(1);
      expect(Math.abs((counts.qa ?? 0) - 1)).toBeLessThanOrEqual(1);
    }
  });

  it("reshuffles each epoch", () => {
    expect(epochOrder(tasks, 5, 0).map((t) => t.id)).not.toEqual(epochOrder(tasks, 5, 1).map((t) => t.id));
  });
});
