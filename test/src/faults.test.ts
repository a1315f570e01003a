import { RunProgress } from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { componentState, ensureBundledTasks, gatewayUrl, postJson, waitFor } from "./helpers.ts";

const RunView = z.object({ status: z.string(), progress: RunProgress.nullable() });
const run = (name: string) => callJson(`${gatewayUrl}/v1/runs/${name}`, { schema: RunView });
const limits = {
  agentTimeoutSec: 150,
  maxTurns: 2,
  contextWindow: 8192,
  concurrency: 2,
  categories: ["repair"],
};

/**
 * One component is killed with SIGKILL while a training run is in flight; the supervisor brings it
 * back (Temporal on the same SQLite file), and the run still finishes with exactly the configured
 * steps and every rollout counted once.
 */
async function survives(component: string, phase: "rollouts" | "training") {
  const name = `e2e-fault-${component}`;
  const started = await postJson(`${gatewayUrl}/v1/runs`, {
    name,
    steps: 1,
    batchSize: 1,
    groupSize: 2,
    ...limits,
  });
  expect(started.status).toBe(202);
  await waitFor(
    `the run to reach ${phase}`,
    async () => {
      const view = await run(name).catch(() => undefined);
      return view?.progress?.phase === phase || view?.status !== "RUNNING" ? true : undefined;
    },
    600_000,
  );
  const before = await componentState(component);
  process.kill(before.pid!, "SIGKILL");
  await waitFor(
    `${component} to come back`,
    async () => {
      const state = await componentState(component);
      return state.restarts > before.restarts && state.healthy ? true : undefined;
    },
    300_000,
  );
  const done = await waitFor(
    "the run to finish",
    async () => {
      const view = await run(name).catch(() => undefined);
      return view && view.status !== "RUNNING" ? view : undefined;
    },
    900_000,
  );
  expect(done.status).toBe("COMPLETED");
  const p = done.progress!;
  expect(p.step).toBe(1);
  expect(p.metrics).toHaveLength(1);
  expect(p.rolloutsDone).toBe(2 + p.metrics[0]!.resampled);
  expect(p.environmentFailures).toBeGreaterThanOrEqual(p.metrics[0]!.resampled);
}

beforeAll(async () => {
  expect(await ensureBundledTasks()).toBeGreaterThan(20);
}, 900_000);

describe("a training run survives a component killed in the middle", () => {
  it("Temporal (restarted on the same SQLite file)", () => survives("temporal", "rollouts"), 1_500_000);
  it("the guard, mid-rollout", () => survives("guard", "rollouts"), 1_500_000);
  it("vLLM, mid-rollout", () => survives("vllm", "rollouts"), 1_500_000);
});
