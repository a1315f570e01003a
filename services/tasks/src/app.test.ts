import { cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { AgentTask, ImportResult, SampleResult, TaskSummary, VerifierBundle } from "@bridle/contracts";
import { createLogger } from "@bridle/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTasksApp } from "./app.ts";
import { TaskStore } from "./store.ts";

const suite = resolve(dirname(fileURLToPath(import.meta.url)), "../../../tasks");
const picked = [
  "build-roman-numerals",
  "build-matrix-ops",
  "repair-median",
  "repair-slugify-visible-test",
  "extend-calculator-ops",
  "extend-todo-done",
  "qa-log-error-count",
  "qa-config-port",
  "qa-sum-file",
];
let dir: string;
let store: TaskStore;
let app: ReturnType<typeof createTasksApp>;
let imported: ImportResult;

const log = createLogger("tasks-test", "silent");
const makeApp = (s: TaskStore) => createTasksApp({ log, store: s, heldOutRatio: 0.25, controlParallel: 2 });
const post = (path: string, body: unknown) =>
  app.request(path, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-tasks-"));
  for (const id of picked) await cp(join(suite, id), join(dir, "import", id), { recursive: true });
  await cp(join(suite, "repair-median"), join(dir, "import", "broken-solution"), { recursive: true });
  await writeFile(join(dir, "import", "broken-solution", "solution", "solve.sh"), "true\n");
  await cp(join(suite, "qa-config-port"), join(dir, "import", "malformed"), { recursive: true });
  await writeFile(join(dir, "import", "malformed", "task.toml"), "[metadata]\ncategory = 3\n");
  const todoToml = join(dir, "import", "extend-todo-done", "task.toml");
  const { readFile } = await import("node:fs/promises");
  await writeFile(
    todoToml,
    (await readFile(todoToml, "utf8")).replace(
      'category = "extend"',
      'category = "extend"\nsplit = "held-out"',
    ),
  );
  store = new TaskStore(join(dir, "data"));
  app = makeApp(store);
  const response = await post("/v1/tasks/import", { path: join(dir, "import") });
  expect(response.status).toBe(200);
  imported = (await response.json()) as ImportResult;
}, 240_000);
afterAll(async () => {
  store.close();
  await rm(dir, { recursive: true, force: true });
});

describe("the tasks service", () => {
  it("imports good tasks, records failed controls, and skips a malformed task with its reason", () => {
    const byId = Object.fromEntries(imported.verdicts.map((v) => [v.id, v]));
    expect(imported.verdicts).toHaveLength(11);
    for (const id of picked) expect(byId[id]).toMatchObject({ ok: true, imported: true });
    expect(byId["broken-solution"]).toMatchObject({ ok: false, imported: true });
    expect(byId["broken-solution"]?.problems[0]).toMatch(/^oracle scored 0, expected 1/);
    expect(byId.malformed).toMatchObject({ ok: false, imported: false });
    expect(byId.malformed?.problems).toEqual([
      "task.toml: metadata.category: Invalid input: expected string, received number",
    ]);
  });

  it("imports unchanged content again without re-running the controls it passed, and re-checks a failure", async () => {
    const again = (await (
      await post("/v1/tasks/import", { path: join(dir, "import") })
    ).json()) as ImportResult;
    const byId = Object.fromEntries(again.verdicts.map((v) => [v.id, v]));
    for (const id of picked) {
      expect(byId[id]).toMatchObject({ ok: true, imported: true, controlsReused: true });
      expect(byId[id]?.controls?.repeats).toBe(2);
    }
    expect(byId["broken-solution"]).toMatchObject({ ok: false, controlsReused: false });
    // Asking for more runs than it passed checks it again.
    const more = (await (
      await post("/v1/tasks/import", { path: join(dir, "import", "repair-median"), controlRepeats: 3 })
    ).json()) as ImportResult;
    expect(more.verdicts[0]).toMatchObject({ ok: true, controlsReused: false });
    expect(more.verdicts[0]?.controls?.runs).toHaveLength(6);
  });

  it("lists and filters tasks", async () => {
    const all = (await (await app.request("/v1/tasks")).json()) as { tasks: TaskSummary[] };
    expect(all.tasks.map((t) => t.id)).toEqual([...picked, "broken-solution"].sort());
    const repairs = (await (await app.request("/v1/tasks?category=repair")).json()) as {
      tasks: TaskSummary[];
    };
    expect(repairs.tasks.map((t) => t.id)).toEqual([
      "broken-solution",
      "repair-median",
      "repair-slugify-visible-test",
    ]);
    // Labels are read as task.toml records them; our own controls are kept beside them.
    expect(repairs.tasks.find((t) => t.id === "repair-median")?.labels).toMatchObject({
      status: "verified",
      stage: "controls",
    });
    const failed = (await (await app.request("/v1/tasks?controls=failed")).json()) as {
      tasks: TaskSummary[];
    };
    expect(failed.tasks.map((t) => t.id)).toEqual(["broken-solution"]);
    const tiered = (await (await app.request("/v1/tasks?tier=one-step")).json()) as { tasks: TaskSummary[] };
    expect(tiered.tasks.map((t) => [t.id, t.tier, t.split])).toEqual([
      ["qa-sum-file", "one-step", "held-out"],
    ]);
    expect(all.tasks.find((t) => t.id === "repair-median")?.tier).toBeNull();
    const poetry = await app.request("/v1/tasks?category=poetry");
    expect(((await poetry.json()) as { tasks: unknown[] }).tasks).toEqual([]); // a free category: none here
    const bad = await app.request("/v1/tasks?category=Poetry%20Night");
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { issues: { path: string }[] } }).error.issues[0]?.path).toBe(
      "query.category",
    );
  });

  it("derives splits from the id hash unless the metadata overrides it", () => {
    const all = store.list();
    expect(all.find((t) => t.id === "extend-todo-done")).toMatchObject({
      split: "held-out",
      splitSource: "metadata",
    });
    const fromMetadata = ["extend-todo-done", "qa-sum-file"];
    expect(all.find((t) => t.id === "qa-sum-file")).toMatchObject({
      split: "held-out",
      splitSource: "metadata",
    });
    expect(all.filter((t) => !fromMetadata.includes(t.id)).every((t) => t.splitSource === "hash")).toBe(true);
  });

  it("gives the agent the instruction and environment, never the tests or the solution", async () => {
    const view = (await (
      await app.request("/v1/tasks/repair-slugify-visible-test/agent")
    ).json()) as AgentTask;
    expect(view.instruction).toMatch(/slug/);
    expect(view.environment.map((f) => f.path).sort()).toEqual(["slug.py", "test_slug.py"]);
    const text = JSON.stringify(view);
    expect(text).not.toContain("check.py");
    expect(text).not.toContain("unicodedata"); // only the reference solution uses it
    const bundle = (await (
      await app.request("/v1/tasks/repair-slugify-visible-test/verifier-bundle")
    ).json()) as VerifierBundle;
    expect(bundle.tests.map((f) => f.path).sort()).toEqual(["check.py", "test.sh"]);
    expect(bundle.verifierTimeoutSec).toBe(60);
    // Bundled tasks work where Harbor's do by default.
    expect([view.workdir, bundle.workdir]).toEqual(["/app", "/app"]);
  });

  it("answers 404 for an unknown task and 400 for a bad id or path", async () => {
    expect((await app.request("/v1/tasks/no-such-task")).status).toBe(404);
    expect((await app.request("/v1/tasks/Bad%20Id/agent")).status).toBe(400);
    const response = await post("/v1/tasks/import", { path: join(dir, "nowhere") });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(/not a folder/);
  });

  it("samples seeded, stratified batches of trusted training tasks only", async () => {
    const train = store.list({ split: "train", controls: "passed" }).map((t) => t.id);
    const first = (await (await post("/v1/samples", { size: 3, seed: 11 })).json()) as SampleResult;
    const again = (await (await post("/v1/samples", { size: 3, seed: 11 })).json()) as SampleResult;
    expect(first).toEqual(again);
    expect(first.epochSize).toBe(train.length);
    const rest = (await (
      await post("/v1/samples", { size: train.length - 3, seed: 11, cursor: first.nextCursor })
    ).json()) as SampleResult;
    const epoch = [...first.tasks, ...rest.tasks].map((t) => t.id);
    expect(epoch.sort()).toEqual([...train].sort());
    expect(epoch).not.toContain("broken-solution");
    const heldOut = store.list({ split: "held-out" }).map((t) => t.id);
    expect(epoch.some((id) => heldOut.includes(id))).toBe(false);
  });

  it("samples only the tasks named, and names those that are not eligible", async () => {
    const train = store.list({ split: "train", controls: "passed" }).map((t) => t.id);
    const chosen = train.slice(0, 2);
    const batch = (await (
      await post("/v1/samples", { size: 4, seed: 3, ids: chosen })
    ).json()) as SampleResult;
    expect(batch.epochSize).toBe(2);
    expect(new Set(batch.tasks.map((t) => t.id))).toEqual(new Set(chosen));
    const refused = await post("/v1/samples", {
      size: 1,
      seed: 3,
      ids: [chosen[0], "broken-solution", "nope"],
    });
    expect(refused.status).toBe(422);
    expect(await refused.json()).toMatchObject({
      error: {
        code: "task_not_eligible",
        message: expect.stringMatching(/^not eligible for train sampling: broken-solution, nope \(/),
      },
    });
  });

  it("samples a task without a reference solution only when unproven tasks are asked for", async () => {
    // As TermiGen's environments ship: tests and an environment, no solution/.
    const folder = join(dir, "unsolved", "no-solution");
    await cp(join(suite, "repair-median"), folder, { recursive: true });
    await rm(join(folder, "solution"), { recursive: true });
    const toml = join(folder, "task.toml");
    const { readFile } = await import("node:fs/promises");
    await writeFile(
      toml,
      (await readFile(toml, "utf8")).replace('category = "repair"', 'category = "repair"\nsplit = "train"'),
    );
    const own = new TaskStore(join(dir, "unsolved-data"));
    try {
      const ownApp = makeApp(own);
      const send = (path: string, body: unknown) =>
        ownApp.request(path, {
          method: "POST",
          body: JSON.stringify(body),
          headers: { "content-type": "application/json" },
        });
      const result = (await (
        await send("/v1/tasks/import", { path: join(dir, "unsolved") })
      ).json()) as ImportResult;
      expect(result.verdicts).toHaveLength(1);
      expect(result.verdicts[0]).toMatchObject({
        id: "no-solution",
        ok: false,
        imported: true,
        controls: { passed: false, unproven: true },
      });
      const strict = await send("/v1/samples", { size: 1, seed: 1 });
      expect(strict.status).toBe(422);
      expect(await strict.json()).toMatchObject({
        error: {
          code: "no_eligible_tasks",
          message:
            "no train task has passed its controls (1 is unproven, with no reference solution: ask for unproven tasks to train on them)",
        },
      });
      const named = await send("/v1/samples", { size: 1, seed: 1, ids: ["no-solution"] });
      expect(await named.json()).toMatchObject({
        error: { message: expect.stringMatching(/or are unproven: no reference solution\)$/) },
      });
      const batch = (await (
        await send("/v1/samples", { size: 1, seed: 1, unproven: true })
      ).json()) as SampleResult;
      expect(batch.tasks.map((t) => t.id)).toEqual(["no-solution"]);
    } finally {
      own.close();
    }
  });

  it("says why when no task is eligible", async () => {
    const empty = new TaskStore(join(dir, "empty"));
    try {
      const response = await makeApp(empty).request("/v1/samples", {
        method: "POST",
        body: JSON.stringify({ size: 2, seed: 1, categories: ["extend"] }),
        headers: { "content-type": "application/json" },
      });
      expect(response.status).toBe(422);
      expect(await response.json()).toMatchObject({
        error: { code: "no_eligible_tasks", message: "no train task in extend has passed its controls" },
      });
    } finally {
      empty.close();
    }
    const bad = await post("/v1/samples", { size: 0, seed: 1 });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { issues: { path: string }[] } }).error.issues[0]?.path).toBe(
      "body.size",
    );
  });

  it("stores a task's measured base success, tied to the content it was measured on", async () => {
    const task = (await (await app.request("/v1/tasks/repair-median")).json()) as TaskSummary;
    expect(task.calibrations).toEqual([]);
    const record = {
      model: "qwen2.5-coder-0.5b",
      harness: "pi",
      temperature: 0.8,
      attempts: 8,
      successes: 3,
      successRate: 0.375,
      meanCorrectness: 0.375,
      toolCallsPerSolved: 2.5,
      taskHash: task.hash,
      measuredAt: new Date().toISOString(),
    };
    const put = (body: unknown) =>
      app.request("/v1/tasks/repair-median/calibration", {
        method: "PUT",
        body: JSON.stringify(body),
        headers: { "content-type": "application/json" },
      });
    expect((await put(record)).status).toBe(200);
    expect((await put({ ...record, harness: "opencode", successes: 1, successRate: 0.125 })).status).toBe(
      200,
    );
    expect((await put({ ...record, successes: 4, successRate: 0.5 })).status).toBe(200); // replaces pi's
    const listed = (await (await app.request(`/v1/tasks?split=${task.split}`)).json()) as {
      tasks: TaskSummary[];
    };
    const calibrations = listed.tasks.find((t) => t.id === "repair-median")!.calibrations;
    expect(calibrations.map((c) => [c.harness, c.successes])).toEqual([
      ["opencode", 1],
      ["pi", 4],
    ]);
    const stale = await put({ ...record, taskHash: "0".repeat(64) });
    expect(stale.status).toBe(409);
    expect(((await stale.json()) as { error: { message: string } }).error.message).toMatch(/changed since/);
    expect((await put({ ...record, successes: 9 })).status).toBe(400);
    expect((await put({ ...record, successRate: 2 })).status).toBe(400);
    const unknown = await app.request("/v1/tasks/no-such-task/calibration", {
      method: "PUT",
      body: JSON.stringify(record),
      headers: { "content-type": "application/json" },
    });
    expect(unknown.status).toBe(404);
  });

  it("keeps the registry across a restart", async () => {
    const reopened = new TaskStore(join(dir, "data"));
    try {
      const again = makeApp(reopened);
      const body = (await (await again.request("/v1/tasks")).json()) as { tasks: TaskSummary[] };
      expect(body.tasks).toHaveLength(10);
      expect(body.tasks.find((t) => t.id === "repair-median")?.controls?.passed).toBe(true);
    } finally {
      reopened.close();
    }
  });

  it("keeps a multi-step task's steps: the agent sees each step's instruction and workdir, the verifier its tests", async () => {
    const fixture = resolve(
      dirname(fileURLToPath(import.meta.url)),
      "../../../packages/harbor/fixtures/two-steps",
    );
    const result = (await (await post("/v1/tasks/import", { path: fixture })).json()) as ImportResult;
    expect(result.verdicts[0]).toMatchObject({ id: "two-steps", ok: true, imported: true });
    const view = (await (await app.request("/v1/tasks/two-steps/agent")).json()) as AgentTask;
    expect(view.stepRewards).toBe("mean");
    expect(view.steps.map((s) => [s.name, s.minReward, s.agentTimeoutSec])).toEqual([
      ["01-create", { reward: 1 }, 90],
      ["02-extend", null, 120],
    ]);
    expect(view.steps[1]?.workdir.map((f) => f.path)).toEqual(["data.txt", "setup.sh"]);
    expect(view.instruction).toMatch(/^Step 1 \(01-create\)/);
    const text = JSON.stringify(view);
    expect(text).not.toContain("write_reward"); // the tests' helper
    expect(text).not.toContain("cat data.txt >> out.txt"); // a step's solution
    const bundle = (await (
      await app.request("/v1/tasks/two-steps/verifier-bundle")
    ).json()) as VerifierBundle;
    expect(bundle.steps.map((s) => [s.name, s.tests.map((f) => f.path), s.verifierEnv])).toEqual([
      ["01-create", ["helper.sh", "test.sh"], {}],
      ["02-extend", ["helper.sh", "test.sh"], { EXPECTED: "two" }],
    ]);
  });

  it("serves its OpenAPI document", async () => {
    const doc = (await (await app.request("/openapi.json")).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(["/v1/tasks", "/v1/tasks/{id}/agent", "/v1/tasks/import", "/v1/samples"]),
    );
  });
});
