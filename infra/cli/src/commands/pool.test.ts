import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runTsx } from "@bridle/service-kit/testing";
import { describe, expect, it } from "vitest";

const cli = fileURLToPath(new URL("../main.ts", import.meta.url));
// A real report from results/: exp-full-s7, whose own paired figure is +3.1 points [-2.0, +8.3].
const s7 = fileURLToPath(
  new URL("../../../../results/experiment-qwen2.5-coder-0.5b-2026-12-06-exp-full-s7.json", import.meta.url),
);

describe("bridle experiment pool (the real CLI process)", () => {
  it("pooling one run gives that run's own paired interval; two runs pool by task", () => {
    const one = runTsx(cli, ["experiment", "pool", s7]);
    expect(one.stderr).toBe("");
    expect(one.status).toBe(0);
    expect(one.stdout).toContain("qwen2.5-coder-0.5b under pi, 5 steps, temperature 0.8, 8 attempts a task");
    expect(one.stdout).toContain("adapter 11/128, base 7/128");
    expect(one.stdout).toContain("difference **+3.1 points, 95% CI [-2.0, +8.3]**: the interval holds 0");
    expect(one.stdout).toContain("| build-motd-file | build | 6/8 | 4/8 | +25.0 |");

    // A second run on the same tasks: s7 with each task's base result as its adapter result too.
    const report = JSON.parse(readFileSync(s7, "utf8"));
    report.name = "s7-as-base";
    for (const t of report.evaluation.byTask) t.candidate = { ...t.baseline };
    const dir = mkdtempSync(join(tmpdir(), "bridle-pool-"));
    const flat = join(dir, "flat.json");
    writeFileSync(flat, JSON.stringify(report));
    const two = runTsx(cli, ["experiment", "pool", s7, flat, "--json"]);
    expect(two.status).toBe(0);
    const pooled = JSON.parse(two.stdout);
    expect(pooled.runs.map((r: { name: string }) => r.name)).toEqual(["exp-full-s7", "s7-as-base"]);
    expect(pooled.candidate).toEqual({ solved: 18, attempts: 256 });
    expect(pooled.difference.estimate).toBeCloseTo(0.03125 / 2, 10);
    const motd = pooled.tasks.find((t: { taskId: string }) => t.taskId === "build-motd-file");
    expect(motd.differences).toEqual([0.25, 0]);
  });

  it("refuses reports it cannot pool, naming the file and what is wrong", () => {
    const dir = mkdtempSync(join(tmpdir(), "bridle-pool-"));
    const report = JSON.parse(readFileSync(s7, "utf8"));
    const write = (name: string, body: unknown) => {
      const file = join(dir, name);
      writeFileSync(file, typeof body === "string" ? body : JSON.stringify(body));
      return file;
    };
    const hotter = write("hotter.json", { ...report, name: "hot", temperature: 1.0 });
    const missing = write("missing.json", {
      ...report,
      name: "fewer",
      evaluation: { ...report.evaluation, byTask: report.evaluation.byTask.slice(1) },
    });
    const cases: [string[], RegExp][] = [
      [[s7, hotter], /hotter\.json has temperature 1, .* has 0\.8: only runs at the same settings pool/],
      [[s7, missing], /fewer: task build-hosts-json of exp-full-s7 is missing/],
      [[s7, s7], /run exp-full-s7 is given twice/],
      [[write("bad.json", "{not json")], /bad\.json is not JSON/],
      [[write("other.json", { name: "x" })], /other\.json is not an experiment report: model: /],
      [[join(dir, "nope.json")], /cannot read .*nope\.json/],
    ];
    for (const [files, message] of cases) {
      const result = runTsx(cli, ["experiment", "pool", ...files]);
      expect(result.status, files.join(" ")).toBe(1);
      expect(result.stderr).toMatch(message);
    }
    const none = runTsx(cli, ["experiment", "pool"]);
    expect(none.status).toBe(2);
    expect(none.stderr).toContain("give the experiments' JSON reports");
  });
});
