import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { AdapterView, TrainerWorkerInfo, TrainStepView } from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";
import { Client, Connection } from "@temporalio/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  componentState,
  config,
  ensureBundledTasks,
  FIXTURE,
  gatewayUrl,
  importFixtureTasks,
  postJson,
  runView,
  servingUrl,
  waitFor,
} from "./helpers.ts";
import { rolloutsIn, startRolloutNode } from "./nodes.ts";

/**
 * Each component is killed with SIGKILL in the middle of a training run; the supervisor brings it
 * back (Temporal on the same SQLite file) and the run still finishes with exactly the configured
 * steps, each applied once, consecutive adapter versions, and every rollout counted once.
 *
 * The runs train on the random-credit fixture (`FIXTURE` in helpers.ts: its verifier is a TEST
 * DOUBLE for partial credit), so every step really trains and every run loads versions.
 */
const run = runView;
const trainerUrl = `http://${config.host}:${config.ports.trainer}/v1`;
const GROUP = 2;

let temporal: Client;
let connection: Connection;
beforeAll(async () => {
  expect(await ensureBundledTasks()).toBeGreaterThan(20);
  await importFixtureTasks();
  connection = await Connection.connect({ address: `${config.host}:${config.ports.temporal}` });
  temporal = new Client({ connection, namespace: "bridle" });
}, 900_000);
afterAll(() => connection?.close());

async function startRun(
  name: string,
  steps: number,
  train: Record<string, unknown> = {},
  spread: { groupSize: number; concurrency: number } = { groupSize: GROUP, concurrency: 2 },
) {
  const started = await postJson(`${gatewayUrl}/v1/runs`, {
    name,
    steps,
    batchSize: 1,
    tasks: [FIXTURE],
    train,
    agentTimeoutSec: 150,
    maxTurns: 1,
    contextWindow: 8192,
    ...spread,
  });
  expect(started.status, JSON.stringify(started.json)).toBe(202);
}

async function killAndAwaitRestart(component: string) {
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
}

/** The run completed exactly as configured, whatever was killed on the way. */
async function expectExactlyOnce(name: string, steps: number, group = GROUP) {
  const done = await waitFor(
    "the run to finish",
    async () => {
      const view = await run(name).catch(() => undefined);
      return view && view.status !== "RUNNING" ? view : undefined;
    },
    1_200_000,
  );
  expect(done.status, `run failed: ${done.failure ?? "no failure recorded"}`).toBe("COMPLETED");
  const p = done.progress!;
  expect(p.step).toBe(steps);
  expect(p.metrics.map((m) => m.step)).toEqual(Array.from({ length: steps }, (_, i) => i + 1));
  // Every step trained and loaded the next version: 1, 2, ... with nothing skipped or repeated.
  expect(p.metrics.map((m) => [m.applied, m.adapterVersion])).toEqual(p.metrics.map((m) => [true, m.step]));
  expect(p.adapterVersion).toBe(steps);
  // Every rollout counted once: the groups (again for a step whose first draw scored one reward),
  // plus one per resampled environment failure.
  const resampled = p.metrics.reduce((n, m) => n + m.resampled, 0);
  const drawn = p.metrics.reduce((n, m) => n + group * (1 + m.redraws), 0);
  expect(p.rolloutsDone).toBe(drawn + resampled);
  expect(p.environmentFailures).toBeGreaterThanOrEqual(resampled);
  const history = await temporal.workflow.getHandle(`run-${name}`).fetchHistory();
  const scheduled = (history.events ?? []).map(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name,
  );
  expect(scheduled.filter((a) => a === "runRollout")).toHaveLength(p.rolloutsDone);

  // The trainer applied each step once; serving holds those versions, produced by those steps.
  for (const m of p.metrics) {
    const step = await callJson(`${trainerUrl}/steps/${name}/${m.step}`, { schema: TrainStepView });
    if (step.state !== "done") throw new Error(`trainer step ${m.step} is ${step.state}, expected done`);
    expect(step.result.adapterHash).toBe(m.adapterHash);
  }
  const adapters = await callJson(`${servingUrl}/v1/adapters`, {
    schema: z.object({ adapters: z.array(AdapterView) }),
  });
  const adapter = adapters.adapters.find((a) => a.name === p.adapter);
  expect(adapter?.current).toBe(steps);
  expect(adapter?.versions.map((v) => [v.version, v.step, v.hash])).toEqual(
    p.metrics.map((m) => [m.step, m.step, m.adapterHash]),
  );
  return p;
}

async function survivesMidRollout(component: string, steps = 1) {
  const name = `e2e-fault-${component}`;
  await startRun(name, steps);
  await waitFor(
    "rollouts to start",
    async () => {
      const view = await run(name).catch(() => undefined);
      return view?.progress?.phase === "rollouts" || view?.status !== "RUNNING" ? true : undefined;
    },
    600_000,
  );
  await killAndAwaitRestart(component);
  await expectExactlyOnce(name, steps);
}

/** Whether a process still runs (an exited one waiting to be reaped does not count). */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
};

/**
 * The trainer is killed while its worker is part-way through a step (some optimiser updates made,
 * nothing committed). The worker goes down with the service, the supervisor restarts it, the
 * activity's retry submits the step again, and it is applied exactly once: the committed record
 * counts only the rerun's updates.
 */
async function survivesTrainerKill() {
  const name = "e2e-fault-trainer";
  const iterations = 3;
  await startRun(name, 1, { iterations });
  const midStep = await waitFor(
    "the trainer to be part-way through the step",
    async () => {
      const view = await callJson(`${trainerUrl}/steps/${name}/1`, { schema: TrainStepView });
      if (view.state === "done") return view; // too late: fails below, naming what happened
      return view.state === "running" && view.progress.phase === "train" && view.progress.done >= 1
        ? view
        : undefined;
    },
    900_000,
  );
  if (midStep.state !== "running")
    throw new Error(`step 1 ended (${JSON.stringify(midStep)}) before the trainer could be killed`);
  expect(midStep.progress.done).toBeLessThan(iterations);
  const worker = await callJson(`${trainerUrl}/worker`, { schema: TrainerWorkerInfo });
  await killAndAwaitRestart("trainer");
  // The worker notices within a second that its service is gone (it may be inside a torch op).
  await waitFor(
    "the killed service's worker to stop",
    async () => (alive(worker.pid!) ? undefined : true),
    30_000,
  );

  await expectExactlyOnce(name, 1);
  const step = await callJson(`${trainerUrl}/steps/${name}/1`, { schema: TrainStepView });
  if (step.state !== "done") throw new Error(`step 1 is ${step.state}, expected done`);
  expect(step.result).toMatchObject({ applied: true, iterations, optimizerSteps: iterations });
}

/** The runner's sandbox groups (named after its pid) and the processes in each: harness and all. */
function sandboxGroups(runnerPid: number): Map<string, number[]> {
  const root = "/sys/fs/cgroup/pids/bridle";
  const groups = new Map<string, number[]>();
  for (const name of existsSync(root) ? readdirSync(root) : []) {
    if (!name.startsWith(`${runnerPid}-`)) continue;
    const pids = readFileSync(join(root, name, "cgroup.procs"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map(Number);
    groups.set(name, pids);
  }
  return groups;
}

/**
 * The runner is killed while harnesses run in its sandboxes: their processes die with it (bwrap
 * goes with its parent, the sandbox's pid namespace with bwrap), the restarted runner clears the
 * groups and folders they left, each interrupted rollout is submitted again once by its
 * activity, and the run completes as configured.
 */
async function survivesRunnerKill() {
  const name = "e2e-fault-runner";
  await startRun(name, 1);
  const runner = await componentState("runner");
  const inFlight = await waitFor(
    "a harness to run in one of the runner's sandboxes",
    async () => {
      const groups = [...sandboxGroups(runner.pid!).entries()].filter(([, pids]) => pids.length > 0);
      return groups.length > 0 ? new Map(groups) : undefined;
    },
    600_000,
  );
  const sandboxDir = join(config.data, "runner", "sandboxes");
  const folders = () => readdirSync(sandboxDir).filter((f) => f.startsWith(`bridle-sbx-${runner.pid}-`));
  expect(folders().length).toBeGreaterThan(0);
  const harnessPids = [...inFlight.values()].flat();
  await killAndAwaitRestart("runner");
  expect(harnessPids.filter(alive)).toEqual([]);
  expect([...sandboxGroups(runner.pid!).keys()]).toEqual([]);
  expect(folders()).toEqual([]);

  await expectExactlyOnce(name, 1);
  // The activities noticed the runner had lost their rollouts and submitted them again: no
  // activity attempt was spent, the rollouts the kill interrupted started twice, every other once.
  const history = await temporal.workflow.getHandle(`run-${name}`).fetchHistory();
  const events = history.events ?? [];
  const rollouts = new Set(
    events
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === "runRollout")
      .map((e) => String(e.eventId)),
  );
  const attempts = events
    .filter((e) => rollouts.has(String(e.activityTaskStartedEventAttributes?.scheduledEventId ?? "")))
    .map((e) => e.activityTaskStartedEventAttributes!.attempt!);
  expect(attempts).toEqual(Array.from({ length: rollouts.size }, () => 1));
  const starts = new Map<string, number>();
  for (const line of readFileSync(join(config.dirs.logs, "runner.log"), "utf8").split("\n")) {
    if (!line.includes('"rollout started"')) continue;
    const id = (JSON.parse(line) as { rolloutId: string }).rolloutId;
    if (id.startsWith(`${name}/`)) starts.set(id, (starts.get(id) ?? 0) + 1);
  }
  expect(starts.size).toBe(rollouts.size);
  expect(Math.max(...starts.values())).toBe(2);
  // At most the run's concurrency was in flight (some may have been past their sandbox, verifying).
  expect([...starts.values()].filter((n) => n === 2).length).toBeLessThanOrEqual(2);
}

describe("a training run survives a component killed in the middle", () => {
  it(
    "Temporal (restarted on the same SQLite file), over two steps",
    () => survivesMidRollout("temporal", 2),
    1_800_000,
  );
  it("the guard, mid-rollout", () => survivesMidRollout("guard"), 1_500_000);
  it("vLLM, mid-rollout", () => survivesMidRollout("vllm"), 1_500_000);
  it("the trainer, mid-step", survivesTrainerKill, 1_500_000);
  it("the runner, mid-rollout, leaving no sandbox behind", survivesRunnerKill, 1_500_000);
});

describe("rollouts spread over a second node, which dies mid-run", () => {
  it("completes exactly once: the dead node's rollouts run again on the first, its finished ones are trained on", async () => {
    const node = await startRolloutNode(config, connection);
    try {
      const name = "e2e-two-nodes";
      await startRun(name, 2, {}, { groupSize: 4, concurrency: 4 });
      // The second node finishes a rollout of the run (its trajectory stays with its own guard);
      // then its worker and runner die with whatever they hold.
      await waitFor(
        "a rollout finished on the second node",
        async () => (rolloutsIn(node.runnerLog, name, "finished").length > 0 ? true : undefined),
        900_000,
      );
      const before = rolloutsIn(node.runnerLog, name, "started");
      await node.kill();
      const p = await expectExactlyOnce(name, 2, 4);
      const onFirst = rolloutsIn(join(config.dirs.logs, "runner.log"), name, "started");
      // Both nodes ran rollouts; whatever the dead one had in flight ran again on the first.
      expect(before.length).toBeGreaterThan(0);
      expect(onFirst.length).toBeGreaterThan(0);
      const finishedThere = rolloutsIn(node.runnerLog, name, "finished");
      const unfinished = before.filter((id) => !finishedThere.includes(id));
      for (const id of unfinished) expect(onFirst).toContain(id);
      expect(new Set([...onFirst, ...before]).size).toBe(p.rolloutsDone);
      process.stdout.write(
        `two nodes: ${p.rolloutsDone} rollouts; the second node started ${before.length} and finished ${finishedThere.length} before it died; the first started ${onFirst.length} (${unfinished.length} of them again)\n`,
      );
    } finally {
      await node.stop();
    }
  }, 1_800_000);
});
