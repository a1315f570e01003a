/**
 * Orchestration overhead: the training-run workflow on a real Temporal dev server, with INSTANT
 * STAND-IN activities (no model, no sandbox), against calling the same stand-ins in a plain loop
 * with the same concurrency. Prints per-rollout and per-step cost side by side, and the ratio.
 *
 *   pnpm bench   (in workflows/)
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadStackConfig } from "@bridle/cli/stack";
import { type RolloutResult, TaskQueues, TrainingRunConfig } from "@bridle/contracts";
import { Client, Connection } from "@temporalio/client";
import { NativeConnection, Runtime, Worker } from "@temporalio/worker";
import type { Activities } from "../src/activities.ts";
import { mapPool } from "../src/workflows/pool.ts";

Runtime.install({ logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never });
const STEPS = 3;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

function standIns(): Partial<Activities> {
  let n = 0;
  return {
    async sampleTasks({ cursor, size }) {
      return {
        tasks: Array.from({ length: size }, (_, i) => ({
          id: `t${cursor + i}`,
          category: "repair" as const,
          hash: "h",
          epoch: 0,
        })),
        nextCursor: cursor + size,
        epochSize: 100,
      };
    },
    async runRollout(request) {
      n++;
      return {
        rolloutId: request.rolloutId ?? `r${n}`,
        taskId: request.taskId,
        harness: request.harness,
        model: request.model,
        correctness: n % 2,
        reward: n % 2,
        toolCalls: { guard: 3, harness: 3 },
        toolCallFormats: { fenced: 3 },
        blocked: [],
        stopReason: "stop",
        finalAnswer: "done",
        environmentFailure: null,
        failedAfterBlock: null,
        durationsMs: { harness: 0, verifier: 0, total: 0 },
        servedModels: [request.model],
        refs: { guardSession: `s${n}`, trajectory: null, logs: "" },
      } satisfies RolloutResult;
    },
    async trainStep(input) {
      return {
        applied: true,
        adapterPath: `/a/${input.step}`,
        adapterHash: `h${input.step}`,
        loss: 0.1,
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

async function plainLoop(group: number): Promise<number> {
  const a = standIns() as Activities;
  const started = performance.now();
  let cursor = 0;
  for (let step = 1; step <= STEPS; step++) {
    const sample = await a.sampleTasks({ seed: 0, cursor, size: 1 });
    const jobs = Array.from({ length: group }, (_, i) => ({ task: sample.tasks[0]!, i }));
    const results = await mapPool(jobs, group, (j) =>
      a.runRollout({
        rolloutId: `b/${step}/${j.i}`,
        taskId: j.task.id,
        harness: "pi",
        model: "m",
        capture: true,
        guardMode: "block",
        rewardMode: "train",
        maxTurns: 1,
        contextWindow: 8192,
        labels: {},
      }),
    );
    const trained = await a.trainStep({
      run: "b",
      step,
      config: TrainingRunConfig.parse({ name: "b" }).train,
      batch: results.map((r) => ({ group: r.taskId, reward: r.reward!, guardSession: "s" })),
    });
    await a.loadAdapter({ name: "m/pi/b", version: step, path: trained.adapterPath, step });
    cursor = sample.nextCursor;
  }
  return performance.now() - started;
}

async function main() {
  const temporalBin = join(loadStackConfig().venv, "bin", "temporal");
  const port = await freePort();
  const db = mkdtempSync(join(tmpdir(), "bridle-bench-temporal-"));
  const server = spawn(
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
  try {
    let connection: NativeConnection | undefined;
    for (let i = 0; i < 100 && !connection; i++) {
      connection = await NativeConnection.connect({ address: `127.0.0.1:${port}` }).catch(async () => {
        await new Promise((r) => setTimeout(r, 300));
        return undefined;
      });
    }
    if (!connection) throw new Error("the Temporal dev server did not start");
    const activities = standIns() as Activities;
    const workflowsPath = fileURLToPath(new URL("../src/workflows.ts", import.meta.url));
    const workers = await Promise.all(
      Object.values(TaskQueues).map((taskQueue) =>
        Worker.create({
          connection: connection!,
          namespace: "bridle",
          taskQueue,
          activities,
          ...(taskQueue === TaskQueues.control ? { workflowsPath } : {}),
          maxConcurrentActivityTaskExecutions: 128,
        }),
      ),
    );
    const running = workers.map((w) => w.run());
    const client = new Client({
      connection: await Connection.connect({ address: `127.0.0.1:${port}` }),
      namespace: "bridle",
    });

    console.log(`Orchestration overhead, ${STEPS} steps of 1 task x G rollouts, instant stand-in activities`);
    console.log(
      "G (concurrent)  plain loop ms/step  workflow ms/step  workflow ms/rollout  ratio (workflow/plain)",
    );
    for (const group of [1, 16, 64]) {
      const plain = await plainLoop(group);
      const config = TrainingRunConfig.parse({
        name: `bench-${group}-${Date.now()}`,
        steps: STEPS,
        groupSize: group,
        concurrency: group,
      });
      const started = performance.now();
      await client.workflow.execute("trainingRun", {
        taskQueue: TaskQueues.control,
        workflowId: `run-${config.name}`,
        args: [{ config }],
      });
      const flow = performance.now() - started;
      console.log(
        `${String(group).padEnd(15)} ${(plain / STEPS).toFixed(2).padStart(18)}  ${(flow / STEPS).toFixed(1).padStart(16)}  ${(flow / STEPS / group).toFixed(2).padStart(19)}  ${(flow / plain).toFixed(0).padStart(10)}x`,
      );
    }
    for (const w of workers) w.shutdown();
    await Promise.all(running);
    await connection.close();
  } finally {
    server.kill("SIGTERM");
    rmSync(db, { recursive: true, force: true });
  }
}

await main();
