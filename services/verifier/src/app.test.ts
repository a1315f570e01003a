import { type ChildProcess, spawn } from "node:child_process";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { ArtifactRef, VerificationResult } from "@bridle/contracts";
import { loadTask, sandboxFor, writeTree } from "@bridle/harbor";
import { packFolder, type Sandbox } from "@bridle/sandbox";
import { ArtifactStore, artifactRoutes, createLogger, createRouter, repoRoot } from "@bridle/service-kit";
import { type ServerType, serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createVerifierApp } from "./app.ts";

const TASKS_PORT = 19402;
const tasksUrl = `http://127.0.0.1:${TASKS_PORT}`;
let dir: string;
let tasks: ChildProcess;
const sandboxes: Sandbox[] = [];
/** The agent phases' workspaces, as the runner hands them over: packed, served, by reference. */
const workspaces: Record<string, ArtifactRef> = {};
const folders: Record<string, string> = {};
// What the runner does, here over real HTTP: the verifier fetches each workspace from this server.
const ARTIFACTS_PORT = 19403;
let artifacts: ArtifactStore;
let artifactServer: ServerType;
const handOver = async (name: string, folder: string) => {
  folders[name] = folder;
  workspaces[name] = await artifacts.put(packFolder(folder));
};

const app = createVerifierApp({
  log: createLogger("verifier-test", "silent"),
  tasksUrl,
  concurrency: 2,
  reward: { w: 0.1, budget: 15 },
  memoryMb: 512,
});
const verifyReq = (body: Record<string, unknown>, target = app) =>
  target.request("/v1/verifications", {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
const verifyOk = async (body: Record<string, unknown>) => {
  const response = await verifyReq(body);
  expect(response.status).toBe(200);
  return (await response.json()) as VerificationResult;
};

/** A workspace left by an agent phase: the task's environment, then `script` run in the sandbox. */
async function workspaceAfter(taskId: string, script: string): Promise<string> {
  const loaded = await loadTask(join(dir, "import", taskId));
  if (!loaded.ok) throw new Error(loaded.problems.join("; "));
  const sandbox = await sandboxFor(loaded.task, dir);
  sandboxes.push(sandbox);
  const solution = await sandbox.scratch("solution");
  await writeTree(solution, loaded.task.solution);
  const run = await sandbox.run(["bash", "-c", script], {
    timeoutMs: 30_000,
    mounts: [{ source: solution, target: "/solution" }],
  });
  expect(run.exitCode).toBe(0);
  return sandbox.workspace;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-verifier-"));
  artifacts = new ArtifactStore(join(dir, "artifacts"), `http://127.0.0.1:${ARTIFACTS_PORT}/v1/artifacts`);
  artifactServer = serve({
    fetch: createRouter().route("/v1", artifactRoutes(artifacts)).fetch,
    hostname: "127.0.0.1",
    port: ARTIFACTS_PORT,
  });
  for (const id of ["repair-median", "build-roman-numerals"]) {
    await cp(join(repoRoot, "tasks", id), join(dir, "import", id), { recursive: true });
  }
  await cp(join(repoRoot, "tasks", "repair-median"), join(dir, "import", "slow-tests"), { recursive: true });
  await cp(join(repoRoot, "packages/harbor/fixtures/two-steps"), join(dir, "import", "two-steps"), {
    recursive: true,
  });
  await writeFile(
    join(dir, "import/slow-tests/task.toml"),
    '[metadata]\ncategory = "repair"\n[verifier]\ntimeout_sec = 1\n',
  );
  await writeFile(join(dir, "import/slow-tests/tests/test.sh"), "sleep 60\n");
  // repair-median in a workdir of its own: its scripts name /srv/project, never /app.
  await cp(join(repoRoot, "tasks", "repair-median"), join(dir, "import", "elsewhere"), { recursive: true });
  for (const file of ["solution/solve.sh", "tests/test.sh", "tests/check.py"]) {
    const text = await readFile(join(dir, "import/elsewhere", file), "utf8");
    await writeFile(join(dir, "import/elsewhere", file), text.replaceAll("/app", "/srv/project"));
  }
  await writeFile(
    join(dir, "import/elsewhere/task.toml"),
    '[metadata]\ncategory = "repair"\n[environment]\nworkdir = "/srv/project"\n',
  );
  // The real tasks service, as its own process.
  tasks = spawn(process.execPath, ["--import", "tsx", join(repoRoot, "services/tasks/src/main.ts")], {
    env: { ...process.env, PORT: String(TASKS_PORT), TASKS_DATA: join(dir, "data"), LOG_LEVEL: "warn" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  for (let i = 0; i < 200; i++) {
    if (
      await fetch(`${tasksUrl}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await sleep(100);
  }
  const imported = await fetch(`${tasksUrl}/v1/tasks/import`, {
    method: "POST",
    body: JSON.stringify({ path: join(dir, "import"), runControls: false }),
    headers: { "content-type": "application/json" },
  });
  expect(imported.status).toBe(200);
  await handOver("solved", await workspaceAfter("repair-median", "bash /solution/solve.sh"));
  await handOver("untouched", await workspaceAfter("repair-median", "true"));
  await handOver("elsewhere", await workspaceAfter("elsewhere", "bash /solution/solve.sh"));
  await handOver("firstStep", await workspaceAfter("two-steps", "echo one > out.txt"));
  await handOver(
    "half",
    await workspaceAfter(
      "build-roman-numerals",
      "bash /solution/solve.sh && sed -i 's/if not 1 <= n <= 3999:/if False:/' roman.py",
    ),
  );
}, 120_000);
afterAll(async () => {
  artifactServer?.close();
  tasks?.kill("SIGTERM");
  for (const sandbox of sandboxes) await sandbox.dispose();
  await rm(dir, { recursive: true, force: true });
});

describe("the verifier service", () => {
  it("scores a correct workspace with the efficiency bonus in training, none in evaluation", async () => {
    const train = await verifyOk({ taskId: "repair-median", workspace: workspaces.solved, calls: 15 });
    expect(train.outcome).toMatchObject({ correctness: 1, failure: null });
    expect(train.reward).toBeCloseTo(1.05, 12);
    const quick = await verifyOk({ taskId: "repair-median", workspace: workspaces.solved, calls: 1 });
    expect(quick.reward).toBeCloseTo(1.09375, 12);
    const evaluation = await verifyOk({
      taskId: "repair-median",
      workspace: workspaces.solved,
      calls: 1,
      mode: "eval",
    });
    expect(evaluation.reward).toBe(1);
  });

  it("scores an untouched workspace 0 and a blocked rollout 0", async () => {
    const wrong = await verifyOk({ taskId: "repair-median", workspace: workspaces.untouched, calls: 3 });
    expect(wrong.outcome.correctness).toBe(0);
    expect(wrong.reward).toBe(0);
    const blocked = await verifyOk({
      taskId: "repair-median",
      workspace: workspaces.solved,
      calls: 3,
      blocked: true,
    });
    expect(blocked.outcome.correctness).toBe(1);
    expect(blocked.reward).toBe(0);
  });

  it("verifies a task's workspace at the task's own workdir", async () => {
    const solved = await verifyOk({
      taskId: "elsewhere",
      workspace: workspaces.elsewhere,
      calls: 2,
      mode: "eval",
    });
    expect(solved.outcome).toMatchObject({ correctness: 1, failure: null });
    const untouched = await verifyOk({ taskId: "elsewhere", workspace: workspaces.untouched, calls: 2 });
    expect(untouched.outcome.correctness).toBe(0);
  });

  it("verifies a named step of a multi-step task with that step's tests, and names a missing or unknown step", async () => {
    const first = await verifyOk({ taskId: "two-steps", workspace: workspaces.firstStep, step: "01-create" });
    expect(first.outcome).toMatchObject({ correctness: 1, failure: null });
    // The second step's tests want its setup's file and the appended line: not there yet.
    const second = await verifyOk({
      taskId: "two-steps",
      workspace: workspaces.firstStep,
      step: "02-extend",
    });
    expect(second.outcome.correctness).toBe(0);
    const unnamed = await verifyReq({ taskId: "two-steps", workspace: workspaces.firstStep });
    expect(unnamed.status).toBe(400);
    expect(await unnamed.json()).toMatchObject({
      error: { code: "step_required", message: expect.stringContaining("01-create, 02-extend") },
    });
    const unknown = await verifyReq({ taskId: "two-steps", workspace: workspaces.firstStep, step: "03-x" });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ error: { code: "unknown_step" } });
    const single = await verifyReq({
      taskId: "repair-median",
      workspace: workspaces.solved,
      step: "01-create",
    });
    expect(await single.json()).toMatchObject({ error: { code: "unknown_step" } });
  });

  it("gives partial credit on a build task, without a bonus", async () => {
    const half = await verifyOk({ taskId: "build-roman-numerals", workspace: workspaces.half, calls: 2 });
    expect(half.outcome.correctness).toBe(0.8);
    expect(half.reward).toBe(0.8);
  });

  it("takes w and B per request", async () => {
    const r = await verifyOk({
      taskId: "repair-median",
      workspace: workspaces.solved,
      calls: 10,
      reward: { w: 0.2, budget: 10 },
    });
    expect(r.reward).toBeCloseTo(1.1, 12);
  });

  it("returns null, not 0, when the tests time out", async () => {
    const r = await verifyOk({ taskId: "slow-tests", workspace: workspaces.solved, calls: 2 });
    expect(r.outcome).toMatchObject({ correctness: null, failure: "timeout" });
    expect(r.reward).toBeNull();
  });

  it("carries what a plain copy could not (a FIFO) through to the tests", async () => {
    const { execFileSync } = await import("node:child_process");
    const odd = join(dir, "odd-workspace");
    await cp(folders.solved!, odd, { recursive: true });
    execFileSync("mkfifo", [join(odd, "pipe")]);
    await handOver("odd", odd);
    const r = await verifyOk({ taskId: "repair-median", workspace: workspaces.odd, calls: 1 });
    expect(r.outcome).toMatchObject({ correctness: 1, failure: null });
  });

  it("leaves the caller's workspace as it was", async () => {
    const { readdir } = await import("node:fs/promises");
    expect((await readdir(folders.untouched!)).sort()).toEqual(["stats.py"]);
  });

  it("rejects an unknown task, a reference that holds nothing, bytes that are not the referenced ones, and a bad body", async () => {
    const unknown = await verifyReq({ taskId: "no-such-task", workspace: workspaces.solved });
    expect(unknown.status).toBe(404);
    const solved = workspaces.solved!;
    const released = {
      ...solved,
      url: solved.url.replace(solved.sha256, "0".repeat(64)),
      sha256: "0".repeat(64),
    };
    const missing = await verifyReq({ taskId: "repair-median", workspace: released });
    expect(missing.status).toBe(400);
    expect(await missing.json()).toMatchObject({ error: { code: "invalid_workspace" } });
    // The untouched workspace's bytes under the solved one's hash: refused, never scored.
    const forged = { ...workspaces.untouched!, sha256: solved.sha256 };
    const mismatch = await verifyReq({ taskId: "repair-median", workspace: forged });
    expect(mismatch.status).toBe(502);
    expect(await mismatch.json()).toMatchObject({ error: { code: "content_mismatch" } });
    const gone = await verifyReq({
      taskId: "repair-median",
      workspace: { ...solved, url: `http://127.0.0.1:19498/v1/artifacts/${solved.sha256}` },
    });
    expect(gone.status).toBe(503);
    expect(await gone.json()).toMatchObject({ error: { code: "workspace_unavailable", retryable: true } });
    const path = await verifyReq({ taskId: "repair-median", workspace: folders.solved });
    expect(path.status).toBe(400);
    expect(await path.json()).toMatchObject({ error: { issues: [{ path: "body.workspace" }] } });
    const bad = await verifyReq({ taskId: "repair-median", workspace: workspaces.solved, calls: -1 });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { issues: [{ path: "body.calls" }] } });
  });

  it("serves its OpenAPI document", async () => {
    const doc = (await (await app.request("/openapi.json")).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toContain("/v1/verifications");
  });

  it("answers 503, retryable, when the tasks service is down", async () => {
    const orphan = createVerifierApp({
      log: createLogger("verifier-test", "silent"),
      tasksUrl: "http://127.0.0.1:19499",
      concurrency: 1,
      reward: { w: 0.1, budget: 15 },
      memoryMb: 512,
    });
    const response = await verifyReq({ taskId: "repair-median", workspace: workspaces.solved }, orphan);
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ error: { code: "tasks_unavailable", retryable: true } });
  });
});
