import { spawnSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { EvalOutput, type HarnessCheck, RunProgress } from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";
import { Client, Connection } from "@temporalio/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  componentState,
  config,
  ensureBundledTasks,
  gatewayHeaders,
  gatewayUrl,
  guardAdminHeaders,
  postJson,
  waitFor,
} from "./helpers.ts";

const RunView = z.object({ status: z.string(), uiUrl: z.string(), progress: RunProgress.nullable() });
const EvalView = z.object({
  status: z.string(),
  output: EvalOutput.nullable(),
  failure: z.string().nullable(),
});
const repo = fileURLToPath(new URL("../..", import.meta.url));
const limits = { agentTimeoutSec: 150, maxTurns: 2, contextWindow: 8192, concurrency: 2 };
/** A one-step run of two repair rollouts, within the limits above, started over HTTP. */
const startRun = (name: string, extra: Record<string, unknown> = {}) =>
  postJson(`${gatewayUrl}/v1/runs`, {
    name,
    steps: 1,
    batchSize: 1,
    groupSize: 2,
    categories: ["repair"],
    ...limits,
    ...extra,
  });

let temporal: Client;
let connection: Connection;
beforeAll(async () => {
  expect(await ensureBundledTasks()).toBeGreaterThan(20);
  connection = await Connection.connect({ address: `${config.host}:${config.ports.temporal}` });
  temporal = new Client({ connection, namespace: "bridle" });
}, 900_000);
afterAll(() => connection?.close());

const run = (name: string) =>
  callJson(`${gatewayUrl}/v1/runs/${name}`, { schema: RunView, headers: gatewayHeaders });

describe("a training run and an evaluation on the real embedded stack (pi on vLLM)", () => {
  it("trains through the HTTP API and survives a worker killed mid-rollout", async () => {
    const started = await startRun("e2e-http");
    expect(started.status).toBe(202);
    // Kill the worker while rollouts are in flight: the supervisor restarts it, Temporal retries
    // the activities, and the runner answers a retried rollout id with the same rollout.
    await waitFor("rollouts to start", async () =>
      (await run("e2e-http")).progress?.phase === "rollouts" ? true : undefined,
    );
    const worker = await componentState("worker");
    // A worker that cannot answer (frozen here, as one starved of CPU by the model server and the
    // trainer would be) never hangs the run's view: it answers in bounded time, without progress.
    // Whatever the view answers, the frozen worker is killed: a worker left stopped would hang every
    // later test of the suite on the shared stack.
    process.kill(worker.pid!, "SIGSTOP");
    const asked = Date.now();
    const frozen = await run("e2e-http").finally(() => process.kill(worker.pid!, "SIGKILL"));
    expect(Date.now() - asked).toBeLessThan(25_000);
    expect(frozen.status).toBe("RUNNING");
    expect(frozen.progress).toBeNull();

    const done = await waitFor(
      "the run to finish",
      async () => {
        const view = await run("e2e-http");
        return view.status === "RUNNING" ? undefined : view;
      },
      900_000,
    );
    expect(done.status).toBe("COMPLETED");
    const p = done.progress!;
    expect(p.step).toBe(1);
    expect(p.metrics).toHaveLength(1);
    const m = p.metrics[0]!;
    // Every rollout is accounted for: the group per draw (a draw whose group scored one reward is
    // drawn again, once), plus one more per resampled environment failure.
    expect(m.redraws).toBeLessThanOrEqual(1);
    expect(m.rollouts).toBe(2 * (1 + m.redraws));
    expect(p.rolloutsDone).toBe(m.rollouts + m.resampled);
    expect(m.environmentFailures).toBeGreaterThanOrEqual(m.resampled);

    const history = await temporal.workflow.getHandle("run-e2e-http").fetchHistory();
    const activities = (history.events ?? [])
      .map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name)
      .filter(Boolean);
    expect(activities).toContain("sampleTasks");
    expect(activities.filter((a) => a === "runRollout")).toHaveLength(p.rolloutsDone);
    if (m.meanReward !== null) expect(activities).toContain("trainStep");
    expect((await componentState("worker")).restarts).toBeGreaterThan(0);
  }, 1_200_000);

  it("evaluates through the HTTP API with a paired report", async () => {
    const started = await postJson(`${gatewayUrl}/v1/evals`, {
      id: "e2e-eval",
      candidate: config.modelName,
      baseline: config.modelName,
      limit: 1,
      temperature: 0.35,
      ...limits,
    });
    expect(started.status).toBe(202);
    // Started with its own checks passed: one task, one attempt, two arms.
    expect(started.json).toMatchObject({ admission: { rollouts: 2 } });
    const view = await callJson(`${gatewayUrl}/v1/evals/e2e-eval?wait=true`, {
      schema: EvalView,
      headers: gatewayHeaders,
      timeoutMs: 900_000,
    });
    expect(view.status).toBe("COMPLETED");
    const report = view.output!.report;
    expect(report.servedBy).toHaveLength(2);
    expect(report.overall.tasks + report.environmentFailures.length).toBeGreaterThan(0);
    expect(view.output!.markdown).toContain("# Evaluation");
    expect(view.output!.markdown).toContain("at temperature 0.35");

    // The temperature is enforced, not only reported: every rollout's guard session carries it, and
    // the guard sets it on each model call whatever the harness asks.
    const history = await temporal.workflow.getHandle("eval-e2e-eval").fetchHistory();
    const sessions = (history.events ?? []).flatMap((e) => {
      const payload = e.activityTaskCompletedEventAttributes?.result?.payloads?.[0]?.data;
      const result = payload ? JSON.parse(Buffer.from(payload).toString("utf8")) : undefined;
      return typeof result?.refs?.guardSession === "string" ? [result.refs.guardSession as string] : [];
    });
    expect(sessions.length).toBeGreaterThanOrEqual(2);
    for (const id of sessions) {
      const session = await callJson(`http://${config.host}:${config.ports.guard}/admin/sessions/${id}`, {
        schema: z.object({ temperature: z.number().optional() }),
        headers: guardAdminHeaders,
      });
      expect(session.temperature).toBe(0.35);
    }
  }, 1_000_000);

  it("refuses an evaluation of a model serving does not know, or of tasks it cannot judge on, in its answer and before any rollout", async () => {
    const refused = async (id: string, status: number, body: Record<string, unknown>) => {
      const res = await postJson(`${gatewayUrl}/v1/evals`, { id, limit: 1, ...limits, ...body });
      expect(res.status, JSON.stringify(res.json)).toBe(status);
      // The refused job's history keeps why, and it never ran a rollout.
      const view = await callJson(`${gatewayUrl}/v1/evals/${id}?wait=true`, {
        schema: EvalView,
        headers: gatewayHeaders,
        timeoutMs: 120_000,
      });
      expect(view.status).toBe("FAILED");
      const history = await temporal.workflow.getHandle(`eval-${id}`).fetchHistory();
      const rollouts = (history.events ?? []).filter(
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === "runRollout",
      );
      expect(rollouts).toHaveLength(0);
      return (res.json as { error: { message: string } }).error.message;
    };
    expect(
      await refused("e2e-unknown-model", 404, { candidate: "nope@v9", baseline: config.modelName }),
    ).toMatch(/serving knows no model 'nope@v9'/);
    const tasks = (await (
      await fetch(`http://${config.host}:${config.ports.tasks}/v1/tasks?split=train`)
    ).json()) as {
      tasks: { id: string }[];
    };
    const trainTask = tasks.tasks[0]!.id;
    expect(
      await refused("e2e-train-task", 400, {
        candidate: config.modelName,
        baseline: config.modelName,
        tasks: [trainTask],
      }),
    ).toMatch(new RegExp(`task '${trainTask}' is in the train split, not held out`));
  }, 300_000);

  it("refuses to train a harness version whose conformance check failed, naming the property", async () => {
    const harnesses = await callJson(
      `http://${config.host}:${config.ports.runner}/v1/rollouts/harnesses/list`,
      {
        schema: z.array(z.object({ name: z.string(), version: z.string() })),
      },
    );
    const opencode = harnesses.find((h) => h.name === "opencode")!;
    // As `bridle harness check opencode --context-window 1024` stores it (run for real in
    // infra/cli's tests): OpenCode compacts before every call.
    const check: HarnessCheck = {
      harness: "opencode",
      version: opencode.version,
      checkedAt: new Date().toISOString(),
      contextWindow: 1024,
      passed: false,
      properties: [
        { name: "prefix", passed: false, detail: "model call #2 starts a new branch (compaction)" },
      ],
      streaming: true,
      usage: true,
      stitching: { "token-ids": 0, messages: 0, "new-branch": 5 },
    };
    const dir = join(config.data, "harness-checks");
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `opencode@${opencode.version}.json`);
    writeFileSync(file, JSON.stringify(check));
    try {
      const started = await startRun("e2e-failed-check", { harness: "opencode" });
      expect(started.status).toBe(202);
      const view = z.object({ status: z.string(), failure: z.string().nullable() });
      const failed = await waitFor("the run to fail", async () => {
        const v = await callJson(`${gatewayUrl}/v1/runs/e2e-failed-check`, {
          schema: view,
          headers: gatewayHeaders,
        });
        return v.status === "RUNNING" ? undefined : v;
      });
      expect(failed.status).toBe("FAILED");
      expect(failed.failure).toMatch(/opencode .* failed its conformance check/);
      expect(failed.failure).toMatch(/prefix: model call #2 starts a new branch/);
    } finally {
      rmSync(file, { force: true });
    }
  }, 300_000);

  it("trains and evaluates again through the bridle CLI", () => {
    const env = { ...process.env };
    const cli = (args: string[]) =>
      spawnSync(process.execPath, ["--import", "tsx", `${repo}/infra/cli/src/main.ts`, ...args], {
        encoding: "utf8",
        env,
        timeout: 1_200_000,
      });
    const trained = cli([
      "train",
      "--name",
      "e2e-cli",
      "--steps",
      "1",
      "--group",
      "2",
      "--max-turns",
      "2",
      "--agent-timeout",
      "150",
      "--follow",
    ]);
    expect(trained.status, trained.stderr).toBe(0);
    expect(trained.stdout).toMatch(/run e2e-cli: COMPLETED/);
    expect(trained.stdout).toMatch(/step 1 done: reward/);
    const evaluated = cli([
      "eval",
      "--candidate",
      config.modelName,
      "--limit",
      "1",
      "--max-turns",
      "2",
      "--agent-timeout",
      "150",
    ]);
    expect(evaluated.status, evaluated.stderr).toBe(0);
    expect(evaluated.stdout).toMatch(/# Evaluation: /);
    const runs = cli(["runs"]);
    expect(runs.stdout).toMatch(/e2e-cli\s+COMPLETED/);

    // A run stopped from the CLI ends after the step it is in, not after all three.
    const started = cli([
      "train",
      "--name",
      "e2e-cancel",
      "--steps",
      "3",
      "--group",
      "2",
      "--max-turns",
      "2",
    ]);
    expect(started.status, started.stderr).toBe(0);
    const cancelled = cli(["runs", "cancel", "e2e-cancel"]);
    expect(cancelled.status, cancelled.stdout).toBe(0);
    expect(cancelled.stdout).toMatch(/run e2e-cancel cancelled: it ends after the step it is in/);
    const ended = cli(["train", "--name", "e2e-cancel", "--follow"]);
    expect(ended.stdout).toMatch(/run e2e-cancel: COMPLETED/);
    expect(ended.stdout).not.toMatch(/step 2 done/);
    const again = cli(["runs", "cancel", "e2e-cancel"]);
    expect(again.status).toBe(1);
    expect(again.stdout).toMatch(/run 'e2e-cancel' is COMPLETED/);
    expect(cli(["runs", "cancel", "no-such-run"]).stdout).toMatch(/no run named 'no-such-run'/);
  }, 2_400_000);
});
