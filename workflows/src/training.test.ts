import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type RolloutRequest,
  type RolloutResult,
  type RunProgress,
  TaskQueues,
  TrainingRunConfig,
} from "@bridle/contracts";
import { Client, Connection } from "@temporalio/client";
import { NativeConnection, Runtime, Worker } from "@temporalio/worker";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Activities, BatchEntry } from "./activities.ts";
import { hasSignal } from "./workflows/training.ts";

/**
 * The training run's control flow on a real Temporal dev server, with SCRIPTED STAND-IN ACTIVITIES
 * (no model, sandbox or trainer: each rollout's reward comes from the test's script). What the
 * real services do is covered by the end-to-end tests in test/; this pins down what the workflow
 * decides from their answers.
 */
const home = resolve(process.env.BRIDLE_HOME ?? fileURLToPath(new URL("../../.bridle", import.meta.url)));
const temporalBin = join(home, "venv", "bin", "temporal");

describe("hasSignal", () => {
  const entry = (group: string, reward: number): BatchEntry => ({ group, reward, guardSession: "s" });
  it("is false when every group scored one reward, and for groups of one", () => {
    expect(hasSignal([])).toBe(false);
    expect(hasSignal([entry("a", 0), entry("a", 0), entry("b", 1), entry("b", 1)])).toBe(false);
    expect(hasSignal([entry("a", 0), entry("b", 1)])).toBe(false);
  });
  it("is true when some group holds two different rewards", () => {
    expect(hasSignal([entry("a", 0), entry("a", 0), entry("b", 0), entry("b", 0.5)])).toBe(true);
  });
});

describe("a step whose every group scored one reward draws again", () => {
  let server: ChildProcess;
  let db: string;
  let client: Client;
  let workers: Worker[] = [];
  let running: Promise<unknown>;
  let connection: NativeConnection;
  const rollouts: RolloutRequest[] = [];
  const batches: BatchEntry[][] = [];
  // Reward per rollout: tasks drawn first (cursor 0) all score 0; later draws alternate 0 and 1.
  const reward = (request: RolloutRequest) =>
    request.taskId.startsWith("c0-") ? 0 : Number(request.rolloutId!.endsWith("g1"));

  beforeAll(async () => {
    if (!existsSync(temporalBin)) throw new Error(`no Temporal CLI at ${temporalBin}: run ./bridle install`);
    Runtime.install({
      logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never,
    });
    const port = await freePort();
    db = mkdtempSync(join(tmpdir(), "bridle-workflow-test-"));
    server = spawn(
      temporalBin,
      [
        "server",
        "start-dev",
        "--headless",
        "--port",
        String(port),
        "--db-filename",
        join(db, "t.sqlite"),
        "--namespace",
        "bridle",
        "--log-level",
        "error",
        "--search-attribute",
        "BridleStep=Int",
        "--search-attribute",
        "BridleEvalScore=Double",
      ],
      { stdio: "ignore" },
    );
    for (let i = 0; i < 200; i++) {
      const c = await NativeConnection.connect({ address: `127.0.0.1:${port}` }).catch(() => undefined);
      if (c) {
        connection = c;
        break;
      }
      await new Promise((r) => setTimeout(r, 300));
    }
    if (!connection) throw new Error("the Temporal dev server did not start");
    const activities = scripted(reward, rollouts, batches) as Activities;
    const workflowsPath = fileURLToPath(new URL("./workflows.ts", import.meta.url));
    // One worker serves every queue: the control queue's workflows and all the activities.
    workers = await Promise.all(
      Object.values(TaskQueues).map((taskQueue) =>
        Worker.create({
          connection,
          namespace: "bridle",
          taskQueue,
          activities,
          ...(taskQueue === TaskQueues.control ? { workflowsPath } : {}),
        }),
      ),
    );
    running = Promise.all(workers.map((w) => w.run()));
    client = new Client({
      connection: await Connection.connect({ address: `127.0.0.1:${port}` }),
      namespace: "bridle",
    });
  }, 120_000);

  afterAll(async () => {
    for (const w of workers) if (w.getState() === "RUNNING") w.shutdown();
    await running?.catch(() => {});
    await connection?.close();
    server?.kill("SIGTERM");
    if (db) rmSync(db, { recursive: true, force: true });
  });

  const run = (config: TrainingRunConfig) =>
    client.workflow.execute("trainingRun", {
      taskQueue: TaskQueues.control,
      workflowId: `run-${config.name}`,
      args: [{ config }],
    }) as Promise<RunProgress>;

  it("trains on the fresh draw, records the redraw, and moves the cursor past both draws", async () => {
    rollouts.length = 0;
    batches.length = 0;
    const config = TrainingRunConfig.parse({ name: "redraw", steps: 1, batchSize: 1, groupSize: 2 });
    const done = await run(config);
    expect(rollouts.map((r) => r.rolloutId).sort()).toEqual([
      "redraw/s1/c0-t/g0",
      "redraw/s1/c0-t/g1",
      "redraw/s1d1/c1-t/g0",
      "redraw/s1d1/c1-t/g1",
    ]);
    // Only the draw with a signal is trained on: the flat one would only dilute it.
    expect(batches).toHaveLength(1);
    expect(batches[0]!.map((b) => b.group)).toEqual(["c1-t", "c1-t"]);
    const metrics = done.metrics[0]!;
    expect(metrics).toMatchObject({ redraws: 1, rollouts: 4, applied: true, meanReward: 0.25 });
    expect(done.cursor).toBe(2);
  }, 60_000);

  it("gives up after redrawFlat draws and lets the trainer record the step as a no-op", async () => {
    rollouts.length = 0;
    batches.length = 0;
    const config = TrainingRunConfig.parse({
      name: "no-redraw",
      steps: 1,
      batchSize: 1,
      groupSize: 2,
      redrawFlat: 0,
    });
    const done = await run(config);
    expect(rollouts).toHaveLength(2);
    expect(batches).toHaveLength(1);
    expect(done.metrics[0]).toMatchObject({ redraws: 0, rollouts: 2, applied: false });
    expect(done.cursor).toBe(1);
  }, 60_000);
});

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

/** Stand-ins for the activities: tasks named by the cursor that drew them, scripted rewards. */
function scripted(
  reward: (r: RolloutRequest) => number,
  rollouts: RolloutRequest[],
  batches: BatchEntry[][],
): Partial<Activities> {
  return {
    async sampleTasks({ cursor, size }) {
      return {
        tasks: Array.from({ length: size }, (_, i) => ({
          id: `c${cursor + i}-t`,
          category: "repair" as const,
          hash: "h",
          epoch: 0,
        })),
        nextCursor: cursor + size,
        epochSize: 100,
      };
    },
    async runRollout(request) {
      rollouts.push(request);
      const r = reward(request);
      return {
        rolloutId: request.rolloutId!,
        taskId: request.taskId,
        harness: request.harness,
        model: request.model,
        correctness: r,
        reward: r,
        toolCalls: { guard: 1, harness: 1 },
        toolCallFormats: {},
        blocked: [],
        stopReason: "stop",
        finalAnswer: "done",
        environmentFailure: null,
        failedAfterBlock: null,
        durationsMs: { harness: 0, verifier: 0, total: 0 },
        servedModels: [request.model],
        refs: { guardSession: `g-${request.rolloutId}`, trajectory: null, logs: "" },
      } satisfies RolloutResult;
    },
    async trainStep(input) {
      batches.push(input.batch);
      const applied = hasSignal(input.batch);
      return {
        applied,
        adapterPath: `/a/${input.step}`,
        adapterHash: `h${input.step}`,
        loss: 0,
        replayed: false,
        tokensPerSecond: 1,
        kl: 0,
        clipFraction: 0,
        logprobDiff: 0,
        tokens: 1,
      };
    },
    async loadAdapter(input) {
      const now = new Date().toISOString();
      return {
        name: input.name,
        version: input.version,
        servedName: `${input.name}@v${input.version}`,
        path: input.path,
        hash: "h",
        step: input.step,
        state: "serving" as const,
        error: null,
        canaryDelta: 1,
        createdAt: now,
        updatedAt: now,
      };
    },
  };
}
