/**
 * Rollout nodes beside a running stack, for the fault tests and the nodes benchmark: each its own
 * guard, runner and rollout-only worker, as another host would run them.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TaskQueues } from "@bridle/contracts";
import { type StackConfig, stackComponents, startComponent } from "@bridle/stack";
import type { Connection } from "@temporalio/client";

/** A free TCP port on the loopback. */
export const freePort = (host: string) =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, host, () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });

/** Rollout ids of a run that a runner's log says it started (or finished). */
export function rolloutsIn(log: string, name: string, what: "started" | "finished"): string[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, "utf8")
    .split("\n")
    .filter((line) => line.includes(`"rollout ${what}"`))
    .map((line) => (JSON.parse(line) as { rolloutId: string }).rolloutId)
    .filter((id) => id.startsWith(`${name}/`));
}

/**
 * One more rollout node, as on another host in miniature: its own guard, runner and rollout-only
 * worker, with their own ports and data folders, pointed at the stack's Temporal, tasks, verifier,
 * serving and model server by URL. Nothing of it is shared with the first node but those URLs.
 */
export async function startRolloutNode(config: StackConfig, connection: Connection) {
  const home = mkdtempSync(join(tmpdir(), "bridle-node-"));
  const [guardPort, runnerPort] = [await freePort(config.host), await freePort(config.host)];
  const url = (port: number) => `http://${config.host}:${port}`;
  const defs = new Map(stackComponents(config).map((c) => [c.name, c]));
  const guardDef = defs.get("guard")!;
  const runnerDef = defs.get("runner")!;
  const workerDef = defs.get("worker")!;
  const guard = await startComponent(
    {
      ...guardDef,
      env: {
        ...guardDef.env,
        PORT: String(guardPort),
        GUARD_DATA_DIR: join(home, "guard"),
        GUARD_WORKERS: "1",
      },
      health: { kind: "http", url: `${url(guardPort)}/healthz` },
    },
    home,
  );
  const runner = await startComponent(
    {
      ...runnerDef,
      env: {
        ...runnerDef.env,
        PORT: String(runnerPort),
        GUARD_URL: url(guardPort),
        RUNNER_URL: url(runnerPort),
        RUNNER_DATA_DIR: join(home, "runner"),
      },
      health: { kind: "http", url: `${url(runnerPort)}/healthz` },
    },
    home,
  );
  // Ready once Temporal sees a new poller on the rollout queue: this worker's.
  const pollers = async () => {
    const described = await connection.workflowService.describeTaskQueue({
      namespace: "bridle",
      taskQueue: { name: TaskQueues.rollout },
      taskQueueType: 2, // activities
    });
    return new Set((described.pollers ?? []).map((p) => p.identity ?? ""));
  };
  const first = await pollers();
  const worker = await startComponent(
    {
      ...workerDef,
      env: {
        ...workerDef.env,
        GUARD_URL: url(guardPort),
        RUNNER_URL: url(runnerPort),
        WORKER_QUEUES: "rollout",
        WORKER_DATA_DIR: join(home, "worker"),
      },
    },
    home,
    300_000,
    async () => [...(await pollers())].some((id) => !first.has(id)),
  );
  return {
    home,
    runnerLog: join(home, "runner.log"),
    guardUrl: url(guardPort),
    kill: async () => {
      await worker.stop("SIGKILL");
      await runner.stop("SIGKILL");
    },
    stop: async () => {
      await Promise.all([worker.stop(), runner.stop(), guard.stop()]);
      rmSync(home, { recursive: true, force: true });
    },
  };
}
