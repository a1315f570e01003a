import { describe, expect, it } from "vitest";
import { computeReward, defaultRewardConfig } from "./index.ts";

describe("computeReward (w = 0.1, B = 15)", () => {
  it("gives a correct run with 0 calls its correctness, without a bonus", () => {
    expect(computeReward({ correctness: 1, calls: 0 })).toBe(1);
  });
  it("gives a correct run with 1 call the largest bonus", () => {
    expect(computeReward({ correctness: 1, calls: 1 })).toBeCloseTo(1 + (0.1 * 15) / 16, 12);
    expect(computeReward({ correctness: 1, calls: 1 })).toBeCloseTo(1.09375, 12);
  });
  it("gives a correct run with 15 calls exactly 1.05", () => {
    expect(computeReward({ correctness: 1, calls: 15 })).toBeCloseTo(1.05, 12);
  });
  it("gives a correct run with 100 calls a small bonus", () => {
    expect(computeReward({ correctness: 1, calls: 100 })).toBeCloseTo(1 + 1.5 / 115, 12);
  });
  it("rewards fewer calls more", () => {
    const r = [1, 5, 15, 100].map((calls) => computeReward({ correctness: 1, calls })!);
    expect(r).toEqual([...r].sort((a, b) => b - a));
  });
  it("scores a wrong run 0 whatever the calls", () => {
    for (const calls of [0, 1, 15, 100]) expect(computeReward({ correctness: 0, calls })).toBe(0);
  });
  it("gives partial credit no bonus", () => {
    expect(computeReward({ correctness: 0.5, calls: 3 })).toBe(0.5);
  });
  it("scores 0 when the guard blocked a call, even a correct one or one whose verifier failed", () => {
    expect(computeReward({ correctness: 1, calls: 4, blocked: true })).toBe(0);
    expect(computeReward({ correctness: null, calls: 4, blocked: true })).toBe(0);
  });
  it("returns null for an environment failure, distinct from 0", () => {
    expect(computeReward({ correctness: null, calls: 7 })).toBeNull();
    expect(computeReward({ correctness: null, calls: 0, mode: "eval" })).toBeNull();
  });
  it("gives no bonus in evaluation", () => {
    expect(computeReward({ correctness: 1, calls: 1, mode: "eval" })).toBe(1);
    expect(computeReward({ correctness: 0, calls: 1, mode: "eval" })).toBe(0);
  });
  it("takes w and B from the configuration", () => {
    expect(computeReward({ correctness: 1, calls: 10 }, { w: 0.2, budget: 10 })).toBeCloseTo(1.1, 12);
    expect(computeReward({ correctness: 1, calls: 10 }, { w: 0, budget: 10 })).toBe(1);
    expect(defaultRewardConfig).toEqual({ w: 0.1, budget: 15 });
  });
  it("rejects impossible inputs with a message naming them", () => {
    expect(() => computeReward({ correctness: 1.5, calls: 1 })).toThrow(/correctness .* got 1.5/);
    expect(() => computeReward({ correctness: 1, calls: -1 })).toThrow(/calls .* got -1/);
  });
});

describe("the reward package", () => {
  it("imports no Node built-ins and nothing at run time, so workflow code may use it", async () => {
    const { readFile } = await import("node:fs/promises");
    const source = await readFile(new URL("./index.ts", import.meta.url), "utf8");
    const imports = [...source.matchAll(/^import\s+(type\s+)?.*from\s+"([^"]+)";$/gm)];
    expect(imports.length).toBeGreaterThan(0);
    for (const [, typeOnly, from] of imports) {
      expect(from).not.toMatch(/^node:/);
      expect(typeOnly, `runtime import of ${from}`).toBeTruthy();
    }
  });
});
