/**
 * For the workflow tests and the orchestration bench only: a real Temporal dev server on a free
 * port, workers for every queue, and STAND-IN activities (no model, sandbox or trainer) whose
 * rollout rewards and training outcome the caller decides.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type RolloutRequest,
  type RolloutResult,
  SearchAttributes,
  type StepMetrics,
  servedName,
  TaskQueues,
} from "@bridle/contracts";
import { Client, Connection } from "@temporalio/client";
import { NativeConnection, Worker } from "@temporalio/worker";
import { type Activities, type BatchEntry, HEARTBEAT_THROTTLE_MAX } from "./activities.ts";

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

export interface DevTemporal {
  /** host:port of its frontend (plain text). */
  address: string;
  client: Client;
  /** Starts a worker per task queue (workflows on the control queue) with these activities. */
  work(activities: Partial<Activities>, maxConcurrentActivities?: number): Promise<void>;
  /** Stops the workers, the connections and the server, and removes its database. */
  stop(): Promise<void>;
}

/** A Temporal dev server (the CLI at `temporalBin`) with Bridle's namespace and search attributes. */
export async function startDevTemporal(temporalBin: string): Promise<DevTemporal> {
  const port = await freePort();
  const db = mkdtempSync(join(tmpdir(), "bridle-temporal-"));
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
      ...Object.values(SearchAttributes).flatMap((a) => [
        "--search-attribute",
        `${a.name}=${a.type === "INT" ? "Int" : a.type === "DOUBLE" ? "Double" : "Keyword"}`,
      ]),
    ],
    { stdio: "ignore" },
  );
  const stopServer = () => {
    server.kill("SIGTERM");
    rmSync(db, { recursive: true, force: true });
  };
  let connection: NativeConnection | undefined;
  for (let i = 0; i < 200 && !connection; i++) {
    connection = await NativeConnection.connect({ address: `127.0.0.1:${port}` }).catch(async () => {
      await new Promise((r) => setTimeout(r, 300));
      return undefined;
    });
  }
  if (!connection) {
    stopServer();
    throw new Error("the Temporal dev server did not start");
  }
  const native = connection;
  const clientConnection = await Connection.connect({ address: `127.0.0.1:${port}` });
  const workers: Worker[] = [];
  const running: Promise<void>[] = [];
  const workflowsPath = fileURLToPath(new URL("./workflows/index.ts", import.meta.url));
  return {
    address: `127.0.0.1:${port}`,
    client: new Client({ connection: clientConnection, namespace: "bridle" }),
    async work(activities, maxConcurrentActivities) {
      for (const taskQueue of Object.values(TaskQueues)) {
        const worker = await Worker.create({
          connection: native,
          namespace: "bridle",
          taskQueue,
          activities,
          maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE_MAX,
          ...(taskQueue === TaskQueues.control ? { workflowsPath } : {}),
          ...(maxConcurrentActivities
            ? { maxConcurrentActivityTaskExecutions: maxConcurrentActivities }
            : {}),
        });
        workers.push(worker);
        running.push(worker.run());
      }
    },
    async stop() {
      for (const w of workers) if (w.getState() === "RUNNING") w.shutdown();
      await Promise.allSettled(running);
      await clientConnection.close();
      await native.close();
      stopServer();
    },
  };
}

export interface StandInScript {
  /** The reward of the n-th rollout (counted from 1). */
  reward(request: RolloutRequest, n: number): number;
  /** Whether a training step on this batch changes the adapter. */
  applied(batch: BatchEntry[]): boolean;
  onRollout?(request: RolloutRequest): void;
  /** What a training run asked the tasks service for. */
  onSample?(input: Parameters<Activities["sampleTasks"]>[0]): void;
  onTrain?(batch: BatchEntry[]): void;
  /** Each step's figures, as the trainer would keep them. */
  onMetrics?(run: string, metrics: StepMetrics): void;
}

/** A finished rollout with one tool call and the given reward, as a stand-in runner answers. */
export function standInResult(
  request: Pick<RolloutRequest, "taskId" | "harness" | "model"> & { rolloutId: string },
  reward: number,
): RolloutResult {
  return {
    rolloutId: request.rolloutId,
    taskId: request.taskId,
    harness: request.harness,
    model: request.model,
    correctness: reward,
    reward,
    toolCalls: { guard: 1, harness: 1 },
    toolCallFormats: {},
    stitching: {},
    blocked: [],
    stopReason: "stop",
    finalAnswer: "done",
    environmentFailure: null,
    failedAfterBlock: null,
    durationsMs: { harness: 0, verifier: 0, total: 0 },
    servedModels: [request.model],
    refs: { guardSession: `g-${request.rolloutId}`, trajectory: null, logs: "" },
  };
}

/** Activities that answer at once: tasks named by the cursor that drew them, scripted rewards. */
export function standInActivities(script: StandInScript): Partial<Activities> {
  let n = 0;
  return {
    async sampleTasks(input) {
      script.onSample?.(input);
      const { cursor, size } = input;
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
      n++;
      script.onRollout?.(request);
      return standInResult(
        { ...request, rolloutId: request.rolloutId ?? `r${n}` },
        script.reward(request, n),
      );
    },
    async trainStep(input) {
      script.onTrain?.(input.batch);
      return {
        applied: script.applied(input.batch),
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
    async recordMetrics(input) {
      script.onMetrics?.(input.run, input.metrics);
    },
    async loadAdapter(input) {
      const now = new Date().toISOString();
      return {
        name: input.name,
        version: input.version,
        servedName: servedName(input.name, input.version),
        path: `/a/${input.step}`,
        hash: input.hash,
        step: input.step,
        parent: input.parent ?? null,
        state: "serving" as const,
        error: null,
        canaryDelta: 1,
        createdAt: now,
        updatedAt: now,
      };
    },
  };
}
