import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "@bridle/service-kit";
import { runTsx } from "@bridle/service-kit/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let dir: string;
const bridle = (...args: string[]) =>
  runTsx(join(repoRoot, "infra/cli/src/main.ts"), args, { timeoutMs: 120_000 });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-cli-tasks-"));
  await cp(join(repoRoot, "tasks/repair-median"), join(dir, "good"), { recursive: true });
  await cp(join(repoRoot, "tasks/repair-median"), join(dir, "wrong-solution"), { recursive: true });
  await writeFile(join(dir, "wrong-solution/solution/solve.sh"), "echo nothing to do\n");
  await cp(join(repoRoot, "tasks/repair-median"), join(dir, "unsolved"), { recursive: true });
  await rm(join(dir, "unsolved/solution"), { recursive: true });
  await cp(join(repoRoot, "tasks/qa-config-port"), join(dir, "malformed"), { recursive: true });
  await writeFile(
    join(dir, "malformed/task.toml"),
    '[metadata]\ncategory = "qa"\n[agent]\ntimeout_sec = -5\n',
  );
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe("bridle tasks validate", () => {
  it("prints one verdict per task, carries on past bad ones, and exits 1", () => {
    const run = bridle("tasks", "validate", dir);
    const lines = run.stdout.split("\n");
    expect(lines).toContain(
      "FAIL  malformed: task.toml: agent.timeout_sec: Too small: expected number to be >0",
    );
    expect(
      lines.some((l) =>
        l.startsWith(
          "FAIL  wrong-solution: oracle scored 0, expected 1: the reference solution does not pass the tests",
        ),
      ),
    ).toBe(true);
    // Each control runs twice by default: one reward per run.
    expect(lines.some((l) => /^ok {4}good {2}\(oracle 1 1, nop 0 0, [\d.]+ s\)$/.test(l))).toBe(true);
    // No reference solution: not failed, unproven, with what its nop control scored.
    expect(
      lines.some((l) =>
        /^UNPROVEN unsolved: no reference solution, so the oracle could not run {2}\(oracle none none, nop 0 0, [\d.]+ s\)$/.test(
          l,
        ),
      ),
    ).toBe(true);
    expect(lines).toContain(
      "tasks: 1 passed, 2 failed, 1 unproven (no reference solution; trained on with --unproven)",
    );
    expect(run.status).toBe(1);
  });

  it("prints one JSON document with --json, the count left out", () => {
    const run = bridle("tasks", "validate", dir, "--schema-only", "--json");
    const parsed = JSON.parse(run.stdout) as { verdicts: { id: string; ok: boolean }[] };
    expect(parsed.verdicts.map((v) => [v.id, v.ok])).toEqual([
      ["good", true],
      ["malformed", false],
      ["unsolved", true],
      ["wrong-solution", true],
    ]);
    expect(run.status).toBe(1);
  });

  it("records the labels in task.toml, unless told not to", async () => {
    const toml = join(dir, "wrong-solution/task.toml");
    await writeFile(toml, await readFile(join(repoRoot, "tasks/repair-median/task.toml"), "utf8"));
    const dry = bridle("tasks", "validate", join(dir, "wrong-solution"), "--no-record");
    expect(dry.status).toBe(1);
    expect(await readFile(toml, "utf8")).toContain('status = "verified"');
    const run = bridle("tasks", "validate", join(dir, "wrong-solution"));
    expect(run.status).toBe(1);
    expect(run.stdout).toContain("labels recorded in 1 task.toml file");
    const text = await readFile(toml, "utf8");
    expect(text).toContain('[metadata.repo2env.evaluation]\nstatus = "needs_repair"\nstage = "controls"');
    expect(text).toContain('reason_codes = ["oracle_failed"]');
    expect(text.match(/\[metadata\.repo2env\.evaluation\]/g)).toHaveLength(1);
  });

  it("explains its usage and bad flags", () => {
    const run = bridle("tasks", "validate");
    expect(run.status).toBe(2);
    expect(run.stderr).toContain("tasks validate <dir>");
    const bad = bridle("tasks", "validate", dir, "--parallel", "zero");
    expect(bad.status).toBe(1);
    expect(bad.stderr).toBe("bridle: --parallel must be an integer from 1 to 16, got zero\n");
    const nowhere = bridle("tasks", "validate", join(dir, "nowhere"));
    expect(nowhere.stderr).toMatch(/^bridle: \S+nowhere: not a folder\n$/);
    expect(nowhere.status).toBe(1);
  });
});
