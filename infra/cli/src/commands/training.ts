import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { adapterHarness, type EvalConfig, ImportResult, type TrainingRunConfig } from "@bridle/contracts";
import { type MatrixCell, renderMatrix, specialisation } from "@bridle/evaluation";
import { callJson, repoRoot, ServiceError } from "@bridle/service-kit";
import type { StackConfig } from "@bridle/stack";
import type { z } from "zod";
import { answer, type GatewayClient, gatewayClient } from "../gateway.ts";

type Say = (line: string) => void;

/** A training run as the gateway shows it. */
export type RunView = Awaited<ReturnType<typeof readRun>>;
const readRun = (api: GatewayClient, name: string) =>
  answer((init) => api.v1.runs[":name"].$get({ param: { name } }, { init }));
/** Every step's figures of a run (the run's view carries only its latest). */
const readMetrics = (api: GatewayClient, name: string) =>
  answer((init) => api.v1.runs[":name"].metrics.$get({ param: { name } }, { init }));
/** An evaluation as the gateway shows it. */
const readEval = (api: GatewayClient, id: string) =>
  answer((init) => api.v1.evals[":id"].$get({ param: { id }, query: {} }, { init }));

export const trainingUsage = `  train [--name N] [--harness pi] [--steps 2] [--batch 1] [--group 2] [--follow]
        [--start fresh|promoted] [--tasks ID,ID] [--unproven] [--max-turns N] [--agent-timeout SEC]
        [--context-window N]
                     start a training run through the gateway; --follow shows live progress;
                     --start promoted continues the (model, harness) lineage from its promoted adapter;
                     --unproven also trains on tasks without a reference solution whose nop passed
  eval --candidate MODEL [--baseline MODEL] [--harness pi] [--limit N] [--attempts N]
        [--temperature T] [--seed S] [--tasks ID,ID] [--unproven]
                     evaluate an adapter version against the base model on held-out tasks
                     (--unproven: also those without a reference solution, marked in the report)
  eval --matrix --candidates MODEL,MODEL [--harnesses pi,opencode] [--limit N] [--attempts N]
                     the cross-harness matrix: each adapter against the base model in every
                     harness (default: the ones they were trained in), paired, as an N x N table
  runs               list training runs
  runs cancel|pause|resume NAME
                     stop a run after the step it is in (its adapter versions stay), or hold
                     it between steps and let it go on; a run goes on when the command that
                     started or followed it is interrupted`;

export interface TrainingFlags {
  name?: string | undefined;
  harness?: string | undefined;
  steps?: string | undefined;
  batch?: string | undefined;
  group?: string | undefined;
  follow?: boolean | undefined;
  unproven?: boolean | undefined;
  candidate?: string | undefined;
  baseline?: string | undefined;
  limit?: string | undefined;
  attempts?: string | undefined;
  tasks?: string | undefined;
  temperature?: string | undefined;
  "max-turns"?: string | undefined;
  "agent-timeout"?: string | undefined;
  "context-window"?: string | undefined;
  seed?: string | undefined;
  start?: string | undefined;
  matrix?: boolean | undefined;
  candidates?: string | undefined;
  harnesses?: string | undefined;
}

/**
 * Rollout limits shared by `train` and `eval`, from their flags. Each harness is told the context
 * the model server really serves (32K for the Qwen models), unless --context-window says otherwise:
 * told less, OpenCode compacts its own 7K-token prompt away.
 */
function rolloutLimits(config: StackConfig, flags: TrainingFlags): Record<string, number> {
  return {
    contextWindow: flags["context-window"] ? Number(flags["context-window"]) : config.model.contextWindow,
    ...(flags["max-turns"] ? { maxTurns: Number(flags["max-turns"]) } : {}),
    ...(flags["agent-timeout"] ? { agentTimeoutSec: Number(flags["agent-timeout"]) } : {}),
  };
}

const int = (value: string | undefined, fallback: number) => (value === undefined ? fallback : Number(value));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A poll of the gateway that rides out a busy or restarting gateway for two minutes: the run or job
 * lives in Temporal, not in this command, and goes on whatever this command sees.
 */
function patientPoll(say: Say) {
  return async <T>(call: () => Promise<T>): Promise<T> => {
    for (let missed = 1; ; missed++) {
      try {
        return await call();
      } catch (err) {
        if (!(err instanceof ServiceError && err.retryable) || missed > 60) throw err;
        if (missed === 1) say(`  (the gateway did not answer: ${err.message}; retrying)`);
        await sleep(2_000);
      }
    }
  };
}

/** Starts a training run; with `follow`, prints each change of phase and each finished step. */
export async function train(
  config: StackConfig,
  flags: TrainingFlags,
  say: Say,
  extra: Partial<z.input<typeof TrainingRunConfig>> = {},
): Promise<RunView> {
  const api = gatewayClient(config);
  const body: z.input<typeof TrainingRunConfig> = {
    name: flags.name ?? `run-${new Date().toISOString().replace(/[-:T]/g, "").slice(0, 14)}`,
    harness: flags.harness ?? "pi",
    baseModel: config.modelName,
    steps: int(flags.steps, 2),
    batchSize: int(flags.batch, 1),
    groupSize: int(flags.group, 2),
    ...(flags.tasks ? { tasks: flags.tasks.split(",").map((t) => t.trim()) } : {}),
    ...(flags.start ? { start: flags.start as "fresh" | "promoted" } : {}),
    ...(flags.unproven ? { unproven: true } : {}),
    ...rolloutLimits(config, flags),
    ...extra,
  };
  const started = await answer((init) => api.v1.runs.$post({ json: body }, { init })).catch(
    (err: unknown) => {
      // Following again a run started earlier (the command was interrupted): it goes on as configured.
      if (flags.follow && flags.name && err instanceof ServiceError && err.code === "run_exists") return null;
      throw err;
    },
  );
  if (!started) {
    say(`a run named ${body.name} exists: following it (it keeps the configuration it was started with)`);
    return follow(config, body.name, say);
  }
  say(
    `run ${started.name} started: ${body.steps ?? 2} step(s) of ${body.batchSize} task(s) x ${body.groupSize} rollouts with ${body.harness}`,
  );
  say(`  Temporal UI: ${started.uiUrl}`);
  return flags.follow ? follow(config, started.name, say) : started;
}

async function follow(config: StackConfig, name: string, say: Say): Promise<RunView> {
  // The run lives in the stack, not in this command: an interrupt stops the following only.
  const interrupted = () => {
    say(
      `\nstopped following; run ${name} goes on in the stack. \`bridle runs cancel ${name}\` stops it after ` +
        `the step it is in; \`bridle train --name ${name} --follow\` follows it again`,
    );
    process.exit(130);
  };
  process.once("SIGINT", interrupted);
  try {
    return await followRun(config, name, say);
  } finally {
    process.removeListener("SIGINT", interrupted);
  }
}

async function followRun(config: StackConfig, name: string, say: Say): Promise<RunView> {
  const api = gatewayClient(config);
  let last = "";
  let shownStep = 0;
  const poll = patientPoll(say);
  for (;;) {
    const run = await poll(() => readRun(api, name));
    const p = run.progress;
    if (p) {
      const line = `  step ${p.step}/${p.steps}  ${p.phase.padEnd(10)} rollouts ${p.rolloutsDone}  env failures ${p.environmentFailures}  serving ${p.servedName}`;
      if (line !== last) say(line);
      last = line;
      for (const m of p.metrics.filter((m) => m.step > shownStep)) {
        const f = (x: number | null, d = 3) => (x === null ? "n/a" : x.toFixed(d));
        say(
          `  step ${m.step} done: reward ${f(m.meanReward)}  success ${f(m.successRate, 2)}  tool calls ${f(m.meanToolCalls, 1)}  loss ${f(m.loss, 4)}  adapter ${!m.applied ? `unchanged${m.adapterVersion ? ` (v${m.adapterVersion})` : ""}` : m.adapterVersion ? `v${m.adapterVersion}${m.adapterHash ? ` (${m.adapterHash.slice(0, 12)})` : ""}` : "unchanged"}${m.redraws ? `  (tasks drawn again ${m.redraws}x: every group scored one reward)` : ""}${m.refusedSamples ? `  (${m.refusedSamples} sample(s) refused: not proven served by the step's version)` : ""}`,
        );
      }
      shownStep = Math.max(shownStep, ...p.metrics.map((m) => m.step));
    }
    if (run.status !== "RUNNING") {
      say(`run ${name}: ${run.status}${run.failure ? `: ${run.failure}` : ""}`);
      return run;
    }
    await sleep(2_000);
  }
}

/**
 * The per-step metrics of a training run up to `step`, every step the trainer kept: empty when
 * the run is unknown to this stack (its history is gone), so a judged version keeps its curves.
 */
export async function runCurves(config: StackConfig, name: string, step: number) {
  const figures = await readMetrics(gatewayClient(config), name).catch(() => null);
  return (figures?.metrics ?? []).filter((m) => m.step <= step);
}

/** An evaluation that already completed under this id, if any (a rerun then uses its result). */
export async function completedEval(config: StackConfig, id: string) {
  const view = await readEval(gatewayClient(config), id).catch(() => null);
  return view?.status === "COMPLETED" && view.output ? view : null;
}

/** Runs an evaluation and prints its Markdown report. */
export async function evaluate(
  config: StackConfig,
  flags: TrainingFlags,
  say: Say,
  extra: Partial<z.input<typeof EvalConfig>> = {},
) {
  if (!flags.candidate)
    throw new Error("bridle eval: --candidate <served model or adapter version> is required");
  const api = gatewayClient(config);
  const body: z.input<typeof EvalConfig> = {
    candidate: flags.candidate,
    baseline: flags.baseline ?? config.modelName,
    harness: flags.harness ?? "pi",
    limit: int(flags.limit, 4),
    attempts: int(flags.attempts, 1),
    ...(flags.temperature ? { temperature: Number(flags.temperature) } : {}),
    ...(flags.seed ? { seed: Number(flags.seed) } : {}),
    ...(flags.tasks ? { tasks: flags.tasks.split(",") } : {}),
    ...(flags.unproven ? { unproven: true } : {}),
    ...rolloutLimits(config, flags),
    ...extra,
  };
  say(`evaluation: ${body.candidate} vs ${body.baseline} (${body.harness})`);
  const view = await runJob(
    "evaluation",
    () => answer((init) => api.v1.evals.$post({ json: body }, { init }), JOB_START_MS),
    (id) => readEval(api, id),
    say,
  );
  if (view.output) {
    say("");
    say(view.output.markdown);
    say(`report: ${view.output.files.markdown} (and report.json beside it)`);
    const decision = view.output.decision;
    if (decision) {
      const to = decision.outcome.adapter
        ? `${decision.outcome.adapter.name}@v${decision.outcome.adapter.version}`
        : "the base model alone";
      say(
        `lineage: ${decision.action === "promote" ? "promoted" : "rolled back"}; now promoted: ${to} (workflow ${decision.workflowId})`,
      );
    }
  }
  return view;
}

/** How long starting a job may take: the gateway answers once the job has checked its models and tasks. */
export const JOB_START_MS = 90_000;

/** What every job's view says of its state. */
interface JobState {
  id: string;
  status: string;
  uiUrl: string;
  failure: string | null;
  progress: { done: number; total: number } | null;
}

/** Starts a job through the gateway and waits for its end, printing its progress as it changes. */
export async function runJob<V extends JobState>(
  noun: "evaluation" | "calibration",
  start: () => Promise<JobState>,
  read: (id: string) => Promise<V>,
  say: Say,
): Promise<V> {
  const started = await start();
  say(`  ${started.id}, Temporal UI: ${started.uiUrl}`);
  let last = "";
  const shownAt = Date.now();
  const poll = patientPoll(say);
  for (;;) {
    const view = await poll(() => read(started.id));
    if (view.progress) {
      const minutes = ((Date.now() - shownAt) / 60_000).toFixed(1);
      const line = `  rollouts ${view.progress.done}/${view.progress.total}`;
      if (line !== last) say(`${line}  (${minutes} min)`);
      last = line;
    }
    if (view.status !== "RUNNING") {
      if (view.failure) say(`${noun} failed: ${view.failure}`);
      return view;
    }
    await sleep(2_000);
  }
}

/** `runs cancel|pause|resume NAME`: the run's signal, through the gateway; the run's state after it. */
export async function signalRun(
  config: StackConfig,
  action: string | undefined,
  name: string | undefined,
  say: Say,
): Promise<number> {
  if (action !== "cancel" && action !== "pause" && action !== "resume") {
    say(`bridle runs: unknown action '${action}' (cancel, pause or resume)`);
    return 2;
  }
  if (!name) {
    say(`bridle runs ${action}: name the run (bridle runs lists them)`);
    return 2;
  }
  const api = gatewayClient(config);
  const run = await answer((init) => api.v1.runs[":name"][action].$post({ param: { name } }, { init })).catch(
    (err: unknown) => {
      if (err instanceof ServiceError && (err.status === 404 || err.status === 409)) {
        const body = err.body as { error?: { message?: string } } | undefined;
        say(`bridle runs ${action}: ${body?.error?.message ?? err.message}`);
        return null;
      }
      throw err;
    },
  );
  if (!run) return 1;
  const what = {
    cancel: "cancelled: it ends after the step it is in, keeping the adapter versions it made",
    pause: "paused: it holds before its next step until `bridle runs resume` names it",
    resume: "resumed",
  }[action];
  say(`run ${run.name} ${what} (${run.uiUrl})`);
  return 0;
}

export async function listRuns(config: StackConfig, say: Say): Promise<number> {
  const api = gatewayClient(config);
  const list = await answer((init) => api.v1.runs.$get({}, { init }));
  if (list.runs.length === 0) say("no training runs yet");
  for (const r of list.runs) say(`${r.name.padEnd(28)} ${r.status.padEnd(10)} ${r.startedAt}  ${r.uiUrl}`);
  return 0;
}

/** The bundled task suite, imported into the running tasks service (controls run there). */
export async function importBundledTasks(config: StackConfig, say: Say): Promise<void> {
  const result = await callJson(`http://${config.host}:${config.ports.tasks}/v1/tasks/import`, {
    schema: ImportResult,
    body: { path: resolve(repoRoot, "tasks") },
    timeoutMs: 3_600_000,
  });
  const ok = result.verdicts.filter((v) => v.ok).length;
  say(`imported ${ok} of ${result.verdicts.length} bundled tasks (oracle and nop controls passed)`);
}

/**
 * `bridle eval --matrix`: every candidate against the base model in every harness, one paired
 * evaluation per cell (each a workflow of its own, rerun-safe by id), on the same held-out tasks
 * with the same seed, printed and written as one N x N table with the specialisation verdict.
 */
export async function evaluateMatrix(config: StackConfig, flags: TrainingFlags, say: Say): Promise<number> {
  const candidates = (flags.candidates ?? flags.candidate ?? "").split(",").filter(Boolean);
  if (candidates.length === 0)
    throw new Error("bridle eval --matrix: --candidates <adapter version,adapter version> is required");
  const harnesses = flags.harnesses
    ? flags.harnesses.split(",").filter(Boolean)
    : [...new Set(candidates.map(adapterHarness).filter((h): h is string => h !== null))];
  if (harnesses.length === 0)
    throw new Error(
      "bridle eval --matrix: name the harnesses (--harnesses pi,opencode): no candidate names one",
    );
  const seed = int(flags.seed, 0);
  const key = createHash("sha256")
    .update(
      JSON.stringify({
        candidates,
        harnesses,
        seed,
        limit: flags.limit,
        attempts: flags.attempts,
        tasks: flags.tasks,
      }),
    )
    .digest("hex")
    .slice(0, 8);
  say(
    `cross-harness matrix ${key}: ${candidates.length} adapter(s) x ${harnesses.length} harness(es), seed ${seed}`,
  );
  const cells: MatrixCell[] = [];
  for (const harness of harnesses) {
    for (const [i, candidate] of candidates.entries()) {
      const id = `matrix-${key}-${harness}-${i}`;
      const view =
        (await completedEval(config, id)) ??
        (await evaluate(config, { ...flags, candidate, harness, seed: String(seed) }, () => {}, { id }));
      if (view.status !== "COMPLETED" || !view.output) {
        say(`  ${candidate} on ${harness}: ${view.status}${view.failure ? `: ${view.failure}` : ""}`);
        return 1;
      }
      const o = view.output.report.overall;
      say(
        `  ${candidate} on ${harness}: ${o.candidate.solved}/${o.candidate.attempts} vs base ${o.baseline.solved}/${o.baseline.attempts}`,
      );
      cells.push({ candidate, harness, report: view.output.report });
    }
  }
  const tasks = [...new Set(cells.flatMap((c) => c.report.servedBy.map((s) => s.taskId)))].sort();
  const markdown = renderMatrix(cells, { seed, tasks });
  const dir = join(config.data, "evals", `matrix-${key}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "matrix.json"),
    JSON.stringify(
      { seed, harnesses, candidates, tasks, cells, specialisation: specialisation(cells) },
      null,
      2,
    ),
  );
  writeFileSync(join(dir, "matrix.md"), markdown);
  say("");
  say(markdown);
  say(`matrix: ${join(dir, "matrix.md")} (and matrix.json beside it)`);
  return 0;
}
