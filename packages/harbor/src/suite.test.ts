import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { TaskCategory } from "@bridle/contracts";
import { describe, expect, it } from "vitest";
import { loadTask, validateFolder } from "./index.ts";

const suite = resolve(dirname(fileURLToPath(import.meta.url)), "../../../tasks");

describe("the bundled task suite", () => {
  it("has every task passing both controls in the sandbox", async () => {
    const verdicts = await validateFolder(suite, { parallel: 2 });
    const failed = verdicts.filter((v) => !v.ok).map((v) => `${v.id}: ${v.problems.join("; ")}`);
    expect(failed).toEqual([]);
    expect(verdicts.length).toBeGreaterThanOrEqual(24);
    for (const verdict of verdicts) {
      expect(verdict.controls?.runs.map((r) => [r.control, r.reward])).toEqual([
        ["oracle", 1],
        ["oracle", 1],
        ["nop", 0],
        ["nop", 0],
      ]);
      expect(verdict.controls?.flaky).toEqual([]);
      expect(verdict.labels).toMatchObject({ status: "verified", stage: "controls", reasonCodes: [] });
    }
  }, 300_000);

  it("runs every check.py on one runner: each task's tests/test.sh is the same but for its reward rule", async () => {
    // The checks' helpers (checklib) live in that runner: a copy edited alone would drift.
    const { readdir, readFile } = await import("node:fs/promises");
    const { existsSync } = await import("node:fs");
    const runners = new Map<string, string[]>();
    for (const entry of await readdir(suite, { withFileTypes: true })) {
      const tests = resolve(suite, entry.name, "tests");
      if (!entry.isDirectory() || !existsSync(resolve(tests, "check.py"))) continue;
      const text = (await readFile(resolve(tests, "test.sh"), "utf8"))
        .replace(/^ALL_OR_NOTHING=[01] /m, "ALL_OR_NOTHING=? ")
        .replace(/^# (the share of checks that pass|1 only when every check passes)\.$/m, "# (its rule).");
      runners.set(text, [...(runners.get(text) ?? []), entry.name]);
    }
    expect([...runners.values()].map((tasks) => tasks.length)).toEqual([expect.any(Number)]);
    expect([...runners.keys()][0]).toContain('sys.modules["checklib"] = checklib');
  });

  it("has at least 8 build, 8 repair, 4 extend and 4 qa tasks", async () => {
    const { readdir } = await import("node:fs/promises");
    const counts: Record<TaskCategory, number> = { build: 0, repair: 0, extend: 0, qa: 0 };
    for (const entry of await readdir(suite, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const loaded = await loadTask(resolve(suite, entry.name));
      if (loaded.ok) counts[loaded.task.category] = (counts[loaded.task.category] ?? 0) + 1;
    }
    expect(Object.keys(counts).sort()).toEqual(["build", "extend", "qa", "repair"]);
    expect(counts.build).toBeGreaterThanOrEqual(8);
    expect(counts.repair).toBeGreaterThanOrEqual(8);
    expect(counts.extend).toBeGreaterThanOrEqual(4);
    expect(counts.qa).toBeGreaterThanOrEqual(4);
  });
});
