import type { TaskResult } from "@bridle/contracts";
import { describe, expect, it } from "vitest";
import { PoolError, poolByTask, renderPooled } from "./pool.ts";
import { meanInterval } from "./stats.ts";

const task = (taskId: string, candidate: number, baseline: number, attempts = 8): TaskResult => ({
  taskId,
  category: taskId.split("-")[0]!,
  impossible: false,
  candidate: { solved: candidate, attempts },
  baseline: { solved: baseline, attempts },
});

const hackCheck: TaskResult = { ...task("qa-impossible", 1, 0), impossible: true };

describe("poolByTask", () => {
  it("averages each task's difference over the runs and takes the t-interval over tasks", () => {
    const pooled = poolByTask([
      { name: "s7", byTask: [task("build-a", 6, 4), task("repair-b", 0, 1), task("qa-c", 0, 0), hackCheck] },
      { name: "s8", byTask: [task("build-a", 4, 4), task("repair-b", 3, 1), task("qa-c", 0, 0)] },
    ]);
    expect(pooled.tasks.map((t) => t.taskId)).toEqual(["build-a", "repair-b", "qa-c"]);
    expect(pooled.tasks.map((t) => t.difference)).toEqual([1 / 8, 1 / 16, 0]);
    expect(pooled.tasks[0]!.candidate).toEqual({ solved: 10, attempts: 16 });
    expect(pooled.candidate).toEqual({ solved: 13, attempts: 48 });
    expect(pooled.baseline).toEqual({ solved: 10, attempts: 48 });
    expect(pooled.difference).toEqual(meanInterval([1 / 8, 1 / 16, 0], [-1, 1]));
    expect(pooled.runs).toEqual([
      { name: "s7", difference: (2 / 8 - 1 / 8 + 0) / 3 },
      { name: "s8", difference: (0 + 2 / 8 + 0) / 3 },
    ]);
    const md = renderPooled(pooled);
    expect(md).toContain("adapter 13/48, base 10/48");
    expect(md).toContain("| build-a | build | 10/16 | 8/16 | +12.5 |");
    expect(md).toContain("the interval holds 0");
  });

  it("gives one run's own paired difference when there is one run", () => {
    const byTask = [task("build-a", 6, 4), task("repair-b", 3, 1), task("qa-c", 1, 0), task("qa-d", 2, 0)];
    const pooled = poolByTask([{ name: "s7", byTask }]);
    expect(pooled.difference).toEqual(meanInterval([2 / 8, 2 / 8, 1 / 8, 2 / 8], [-1, 1]));
    expect(renderPooled(pooled)).toContain("the adapters beat the base");
  });

  it("refuses runs that are not on the same tasks, naming the run and the task", () => {
    const a = { name: "s7", byTask: [task("build-a", 1, 0), task("repair-b", 0, 0)] };
    expect(() => poolByTask([a, { name: "s8", byTask: [task("build-a", 1, 0)] }])).toThrow(
      new PoolError("s8: task repair-b of s7 is missing"),
    );
    expect(() => poolByTask([a, { name: "s9", byTask: [...a.byTask, task("extend-c", 0, 0)] }])).toThrow(
      "s9: task extend-c is not in s7",
    );
    expect(() => poolByTask([{ name: "old", byTask: [] }])).toThrow("old: no per-task results");
    expect(() => poolByTask([{ name: "s1", byTask: [task("build-a", 0, 0, 0)] }])).toThrow(
      "s1: task build-a has no valid attempt in one arm",
    );
    expect(() => poolByTask([])).toThrow("nothing to pool");
  });
});
