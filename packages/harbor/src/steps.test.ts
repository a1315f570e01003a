import { cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { belowMinReward, loadTask, rollUpSteps, runControls, taskImage } from "./index.ts";
import { buildableImages } from "./test-support.ts";

const fixture = resolve(import.meta.dirname, "../fixtures/two-steps");
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-steps-"));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe("step rewards", () => {
  it("roll up as the mean of the steps that ran, or as the last one's", () => {
    expect(rollUpSteps([1, 0.5], "mean")).toBe(0.75);
    expect(rollUpSteps([1, 0.5], "final")).toBe(0.5);
    expect(rollUpSteps([], "mean")).toBeNull();
  });

  it("stop the task below min_reward, per key, with `reward` as the step's reward", () => {
    expect(belowMinReward({ correctness: 1 }, { reward: 1 })).toBeNull();
    expect(belowMinReward({ correctness: 0.5 }, { reward: 1 })).toBe("reward = 0.5, below min_reward 1");
    expect(belowMinReward({ correctness: 1, details: { style: 0.2 } }, { style: 0.5 })).toBe(
      "style = 0.2, below min_reward 0.5",
    );
    expect(belowMinReward({ correctness: 1 }, { style: 0.5 })).toBe(
      "style: not written, below min_reward 0.5",
    );
    expect(belowMinReward({ correctness: 0 }, null)).toBeNull();
  });
});

describe("a multi-step task (Harbor schema 1.1, [[steps]])", () => {
  it("loads each step's instruction, tests over the shared ones, workdir, limits and threshold", async () => {
    const loaded = await loadTask(fixture);
    if (!loaded.ok) throw new Error(loaded.problems.join("; "));
    const { task } = loaded;
    expect(task.stepRewards).toBe("mean");
    expect(task.steps.map((s) => s.name)).toEqual(["01-create", "02-extend"]);
    const [create, extend] = task.steps;
    // The step's own test.sh replaces the shared one; the shared helper stays.
    expect(create!.tests.map((f) => f.path).sort()).toEqual(["helper.sh", "test.sh"]);
    expect(create!.tests.find((f) => f.path === "test.sh")!.content.toString()).toContain("out.txt");
    expect(create!).toMatchObject({ minReward: { reward: 1 }, agentTimeoutSec: 90, verifierTimeoutSec: 60 });
    expect(extend!).toMatchObject({
      minReward: null,
      agentTimeoutSec: 120,
      verifierEnv: { EXPECTED: "two" },
    });
    expect(extend!.workdir.map((f) => f.path).sort()).toEqual(["data.txt", "setup.sh"]);
    expect(task.instruction).toMatch(
      /^Step 1 \(01-create\):\nCreate a file.*\n\nStep 2 \(02-extend\):\nAppend/s,
    );
    expect(task.notes).toContain("task.toml: steps[1].reviewer: not read by Bridle (kept)");
  });

  it("names what a step lacks, and refuses steps that share a name", async () => {
    const task = join(dir, "broken-steps");
    await cp(fixture, task, { recursive: true });
    await rm(join(task, "steps/01-create/instruction.md"));
    await rm(join(task, "steps/02-extend/tests"), { recursive: true });
    await rm(join(task, "tests/test.sh"));
    const broken = await loadTask(task);
    expect(broken.ok || broken.problems).toEqual([
      "steps/01-create/instruction.md: missing",
      "steps/02-extend/tests/test.sh: missing, and the task has no shared tests/test.sh (the verifier runs it)",
    ]);
    await writeFile(join(task, "task.toml"), '[[steps]]\nname = "a"\n[[steps]]\nname = "a"\n');
    const twice = await loadTask(task);
    expect(twice.ok || twice.problems).toContain(
      "task.toml: steps: step names must be unique (each names its folder under steps/)",
    );
  });

  it("passes both controls in one sandbox: the oracle solves each step, the nop stops at the first", async () => {
    const loaded = await loadTask(fixture);
    if (!loaded.ok) throw new Error(loaded.problems.join("; "));
    const controls = await runControls(loaded.task, { baseDir: dir, repeats: 1 });
    expect(controls.runs.map((r) => [r.control, r.reward, r.message])).toEqual([
      ["oracle", 1, "ok"],
      ["nop", 0, "ok"],
    ]);
    expect(controls.passed).toBe(true);
  }, 120_000);

  it("fails the oracle when a later step's solution is wrong, naming the step's score", async () => {
    const task = join(dir, "wrong-step");
    await cp(fixture, task, { recursive: true });
    await writeFile(join(task, "steps/02-extend/solution/solve.sh"), "#!/bin/bash\necho three >> out.txt\n");
    const loaded = await loadTask(task);
    if (!loaded.ok) throw new Error(loaded.problems.join("; "));
    const controls = await runControls(loaded.task, { baseDir: dir, repeats: 1 });
    const oracle = controls.runs.find((r) => r.control === "oracle")!;
    expect(oracle.reward).toBe(0.5);
    expect(oracle.message).toBe(
      "oracle scored 0.5, expected 1: the reference solutions do not pass the steps' tests (step 01-create: 1; step 02-extend: 0)",
    );
  }, 120_000);
});

describe("Harbor's own multi-step recipe (harbor-cookbook, Apache-2.0), unchanged", () => {
  const recipe = resolve(import.meta.dirname, "../fixtures/harbor-cookbook-multi-step");

  it("builds its image and passes both controls: three steps, a workdir with setup.sh, step env, thresholds", async () => {
    const images = await buildableImages();
    const loaded = await loadTask(recipe);
    if (!loaded.ok) throw new Error(loaded.problems.join("; "));
    const { task } = loaded;
    expect(task.steps.map((s) => [s.name, s.minReward])).toEqual([
      ["scaffold", { reward: 1 }],
      ["implement", { reward: 0.5 }],
      ["document", null],
    ]);
    // The recipe's [environment.env] reaches every phase; the step's own verifier env is over it.
    expect(task.steps[1]!.verifierEnv).toEqual({
      GREETER_PROJECT: "hello-multi-step-full",
      EXPECTED_NAME: "Harbor",
      EXPECTED_GREETING: "Hello, Harbor!",
    });
    expect(task.steps[1]!.workdir.map((f) => f.path).sort()).toEqual(["config.txt", "setup.sh"]);
    const built = await taskImage(task, images);
    expect(built.problem).toBeUndefined();
    expect(built.image).not.toBeNull();
    const controls = await runControls(task, { baseDir: dir, repeats: 1, image: built.image });
    expect(controls.runs.map((r) => [r.control, r.reward, r.message])).toEqual([
      ["oracle", 1, "ok"],
      ["nop", 0, "ok"],
    ]);
  }, 600_000);
});
