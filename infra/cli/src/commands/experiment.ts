import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { EvalReport, StepMetrics, TaskSummary } from "@bridle/contracts";
import { callJson, repoRoot } from "@bridle/service-kit";
import type { StackConfig } from "@bridle/stack";
import { z } from "zod";
import { CALIBRATION_MAX_TURNS } from "./tasks.ts";
import { completedEval, evaluate, importBundledTasks, runCurves, train } from "./training.ts";

type Say = (line: string) => void;

export interface ExperimentFlags {
  steps?: string | undefined;
  seed?: string | undefined;
  batch?: string | undefined;
  group?: string | undefined;
  attempts?: string | undefined;
  tasks?: string | undefined;
  harness?: string | undefined;
  temperature?: string | undefined;
  "max-turns"?: string | undefined;
  full?: boolean | undefined;
  out?: string | undefined;
  name?: string | undefined;
  lr?: string | undefined;
  heldout?: string | undefined;
  "heldout-tier"?: string | undefined;
  candidate?: string | undefined;
}

export const experimentUsage = `  experiment [--full] [--steps N] [--seed S] [--batch B] [--group G] [--attempts A]
        [--tasks ID,ID] [--heldout N] [--heldout-tier TIER|all] [--temperature T] [--lr LR]
        [--out DIR] [--candidate SERVED-NAME]
                     evaluate the base model on held-out tasks, train N steps, evaluate the
                     adapter against the base on the same tasks, attempts and seeds; prints
                     the learning curves and the verdict, writes a report (Markdown, JSON, PNG);
                     --candidate skips training and judges an adapter version already served
                     (a run stopped early: the curves are its steps up to that version, when
                     this stack still holds the run); the held-out tasks are
                     those of the training tasks' tier when they share one (--heldout-tier
                     names another, or all)`;

/** The two sizes of the experiment: the demo's short one, and the full one that decides. */
const SIZES = {
  short: {
    steps: 2,
    batch: 1,
    group: 4,
    attempts: 1,
    heldOut: 8,
    maxTurns: 4,
    agentTimeoutSec: 300,
    lr: 2e-4,
  },
  // Sized to finish within 2 hours on 2 CPU cores. A step of 12 rollouts is 40-50 model calls of
  // ~1,600 tokens each (pi re-renders the model's tool calls, so calls never chain): 64K-76K tokens
  // as separate sequences, about 10K once their shared 1,364-token prompt prefix runs once.
  // 8 attempts a held-out task: with 6, sampling noise alone spread the per-task differences of a
  // base near 10% by about 0.2, wider than the effect the run is there to resolve.
  full: {
    steps: 5,
    batch: 2,
    group: 6,
    attempts: 8,
    lr: 2e-4,
    heldOut: 1000,
    maxTurns: CALIBRATION_MAX_TURNS,
    agentTimeoutSec: 420,
  },
};

/**
 * Curriculum band on the base's mean verifier score (partial credit counts): a task inside it gives
 * a group of rollouts different rewards, so GRPO has a signal, and leaves room to learn.
 */
const BAND = { min: 0.05, max: 0.8 };

/** Rollouts in flight at once: at most this many while judging, and a training step's batch up to it. */
const JUDGING_STREAMS = 16;

const int = (v: string | undefined, d: number) => (v === undefined ? d : Number(v));
const pct = (x: number | null) => (x === null ? "n/a" : `${(100 * x).toFixed(1)}%`);
const num = (x: number | null | undefined, d = 3) => (x === null || x === undefined ? "n/a" : x.toFixed(d));

const listTasks = async (config: StackConfig, query: string) =>
  (
    await callJson(`http://${config.host}:${config.ports.tasks}/v1/tasks?${query}`, {
      schema: z.object({ tasks: z.array(z.custom<TaskSummary>()) }),
    })
  ).tasks;

/**
 * On a fresh data folder the registry is empty: the experiment imports the bundled suite first (its
 * controls run once), as the demo does, so `bridle experiment` works from a new checkout.
 */
export async function ensureBundledTasks(config: StackConfig, say: Say): Promise<void> {
  if ((await listTasks(config, "")).length > 0) return;
  say("the task registry is empty: importing the bundled tasks");
  await importBundledTasks(config, say);
}

/**
 * The held-out tasks to judge on: the held-out tasks of one tier, so the experiment judges what it
 * trains for; the tier is named, or the one every training task shares. The choice rests on what a
 * task is, never on a measured score (choosing by the base's score would favour the adapter by
 * regression to the mean). Undefined: every held-out task (the evaluation's own limit applies).
 */
export async function heldOutTasks(
  config: StackConfig,
  flags: ExperimentFlags,
  training: string[] | undefined,
  say: Say,
): Promise<string[] | undefined> {
  let tier = flags["heldout-tier"];
  if (tier === "all") return undefined;
  if (!tier && training) {
    const tiers = new Set(
      (await listTasks(config, "split=train")).filter((t) => training.includes(t.id)).map((t) => t.tier),
    );
    if (tiers.size === 1) tier = [...tiers][0] ?? undefined;
  }
  if (!tier) return undefined;
  const ids = (
    await listTasks(config, `split=held-out&controls=passed&tier=${encodeURIComponent(tier)}`)
  ).map((t) => t.id);
  if (ids.length === 0) throw new Error(`no held-out task of tier ${tier} has passed its controls`);
  say(`held-out: the ${ids.length} held-out tasks of tier ${tier}`);
  return ids;
}

/** Training tasks: the named ones, else the calibrated ones inside the band, else the whole train split. */
async function trainingTasks(config: StackConfig, flags: ExperimentFlags, harness: string, say: Say) {
  if (flags.tasks) return flags.tasks.split(",").map((t) => t.trim());
  const tasks = await listTasks(config, "split=train&controls=passed");
  const banded = tasks.filter((t) =>
    t.calibrations.some(
      (c) =>
        c.model === config.modelName &&
        c.harness === harness &&
        c.meanCorrectness >= BAND.min &&
        c.meanCorrectness <= BAND.max,
    ),
  );
  if (banded.length >= 2) {
    say(`curriculum: ${banded.length} training tasks with base mean score in [${BAND.min}, ${BAND.max}]`);
    return banded.map((t) => t.id);
  }
  say(
    `curriculum: fewer than 2 calibrated training tasks in [${BAND.min}, ${BAND.max}] for ${config.modelName}/${harness}: training on the whole train split (run 'bridle tasks calibrate --split train' first for a signal)`,
  );
  return undefined;
}

/**
 * `bridle experiment`: one command that decides whether training helped. The base arm and the
 * adapter arm of the final evaluation run on the same held-out tasks, attempts and sampling seeds.
 */
export async function experiment(config: StackConfig, flags: ExperimentFlags, say: Say): Promise<number> {
  const started = Date.now();
  const size = flags.full ? SIZES.full : SIZES.short;
  const seed = int(flags.seed, 0);
  const harness = flags.harness ?? "pi";
  const steps = int(flags.steps, size.steps);
  const temperature = flags.temperature ? Number(flags.temperature) : 0.8;
  const maxTurns = int(flags["max-turns"], size.maxTurns);
  const attempts = int(flags.attempts, size.attempts);
  // Judging runs 16 rollouts at once (the CPU engine's aggregate decode still grows from 8 streams
  // to 16); a training step runs its whole batch as one wave, so no straggler wave of a few.
  const limits = { maxTurns, agentTimeoutSec: size.agentTimeoutSec, concurrency: JUDGING_STREAMS };
  const name =
    flags.name ??
    `exp-${flags.full ? "full" : "short"}-s${seed}-${new Date().toISOString().replace(/[-:T]/g, "").slice(0, 12)}`;
  const judging: Judging = {
    config,
    flags,
    say,
    name,
    harness,
    seed,
    temperature,
    attempts,
    limits,
    size,
    started,
  };
  if (flags.candidate) {
    // An adapter version trained earlier (a run stopped before its last step): judged the same way.
    const version = Number(/@v(\d+)$/.exec(flags.candidate)?.[1] ?? Number.NaN);
    if (!Number.isInteger(version)) {
      say(
        `--candidate must be a served adapter version such as <base>/<harness>/<run>@v2, got ${flags.candidate}`,
      );
      return 2;
    }
    say(
      `experiment ${name}: ${flags.candidate} (trained ${version} steps earlier) against ${config.modelName}`,
    );
    const heldOut = await heldOutTasks(config, flags, await trainingTasks(config, flags, harness, say), say);
    // The run's own steps up to that version, when this stack still holds its history.
    const run = /\/([^/@]+)@v\d+$/.exec(flags.candidate)?.[1];
    const curves = run ? await runCurves(config, run, version) : [];
    if (curves.length === 0) say(`no training history of ${flags.candidate} here: the report has no curves`);
    return judge(judging, { steps: version, candidate: flags.candidate, curves }, heldOut);
  }
  const tasks = await trainingTasks(config, flags, harness, say);
  const heldOut = await heldOutTasks(config, flags, tasks, say);

  say(`experiment ${name}: ${config.modelName} with ${harness}, ${steps} steps, seed ${seed}`);
  if (flags.full && config.precision === "fp32")
    say(
      "note: serving and training run in fp32 here (no bf16 matmul units on this CPU, or BRIDLE_PRECISION=fp32): steps take several times longer and the trainer needs about twice the memory, so the full experiment's 2-hour budget, sized for bf16, will not hold",
    );
  const batch = int(flags.batch, size.batch);
  const group = int(flags.group, size.group);
  const run = await train(
    config,
    {
      name,
      harness,
      steps: String(steps),
      batch: String(batch),
      group: String(group),
      follow: true,
      ...(tasks ? { tasks: tasks.join(",") } : {}),
    },
    say,
    {
      ...limits,
      concurrency: Math.min(JUDGING_STREAMS, batch * group),
      seed,
      temperature,
      train: { learningRate: flags.lr ? Number(flags.lr) : size.lr, scaleByStd: true, seed },
    },
  );
  if (run.status !== "COMPLETED" || !run.progress) {
    say(`the training run ended ${run.status}: no verdict`);
    return 1;
  }
  // A run cancelled on the way (to fit a time budget) ends after the step it was in: judge what it trained.
  const trained = run.progress.step;
  if (trained < steps) say(`the run stopped after ${trained} of ${steps} steps: judging adapter v${trained}`);
  return judge(
    judging,
    { steps: trained, candidate: run.progress.servedName, curves: await runCurves(config, name, trained) },
    heldOut,
  );
}

interface Judging {
  config: StackConfig;
  flags: ExperimentFlags;
  say: Say;
  name: string;
  harness: string;
  seed: number;
  temperature: number;
  attempts: number;
  limits: { maxTurns: number; agentTimeoutSec: number; concurrency: number };
  size: (typeof SIZES)["full"];
  started: number;
}

/** The paired evaluation of a trained version against the base, the verdict and the report. */
async function judge(
  j: Judging,
  trained: { steps: number; candidate: string; curves: StepMetrics[] },
  heldOut: string[] | undefined,
): Promise<number> {
  const { config, flags, say, name, harness, seed, temperature, attempts, limits, size, started } = j;
  const { steps, candidate } = trained;
  const limit = flags.heldout ?? String(size.heldOut);
  const id = judgingId(name, {
    candidate,
    baseline: config.modelName,
    harness,
    attempts,
    limit,
    temperature,
    seed,
    limits,
    heldOut,
  });
  const done = await completedEval(config, id);
  if (done) say(`the evaluation ${id} already completed with these settings: its result is used`);
  const view =
    done ??
    (await evaluate(
      config,
      {
        candidate,
        harness,
        attempts: String(attempts),
        limit,
        temperature: String(temperature),
      },
      say,
      { ...limits, seed, id, ...(heldOut ? { tasks: heldOut } : {}) },
    ));
  if (view.status !== "COMPLETED" || !view.output) return 1;
  const report = buildExperimentReport({
    name,
    config,
    harness,
    steps,
    seed,
    temperature,
    candidate,
    curves: trained.curves,
    eval: view.output.report,
    wallSeconds: Math.round((Date.now() - started) / 1000),
    command: reproducingCommand(config, process.argv.slice(3)),
  });
  const outDir = resolve(flags.out ?? join(config.data, "experiments"));
  const files = writeReport(config, report, outDir, view.output.markdown);
  printCurves(report.curves, say);
  if (report.throughput)
    say(
      `training throughput: ${report.throughput.rolloutsPerHour} rollouts an hour, ${report.throughput.secondsPerStep} s a step`,
    );
  say("");
  say(`verdict: ${report.verdict}`);
  say(`report: ${files.join(", ")}`);
  return 0;
}

/** Settings of the stack that change what the model does, so a report's command reruns the same experiment. */
const RESULT_SETTINGS = ["BRIDLE_MODEL", "BRIDLE_MAX_TOKENS", "BRIDLE_PRECISION"];

/** The command line that reruns this experiment: its arguments, after the settings that shape the results. */
export function reproducingCommand(config: Pick<StackConfig, "settings">, args: string[]): string {
  const env = RESULT_SETTINGS.filter((k) => config.settings[k] !== undefined).map(
    (k) => `${k}=${config.settings[k]}`,
  );
  return [...env, "bridle", "experiment", ...args].join(" ").trim();
}

/**
 * The evaluation's id: the experiment's name and a digest of everything that decides the judging
 * (candidate, baseline, harness, attempts, held-out tasks, seed, temperature, limits). A rerun
 * with the same settings reuses a completed evaluation; any other setting (more attempts, say)
 * runs its own instead of reporting the old one's figures.
 */
export function judgingId(name: string, settings: Record<string, unknown>): string {
  const digest = createHash("sha256").update(JSON.stringify(settings)).digest("hex").slice(0, 8);
  return `${name}-eval-${digest}`;
}

interface ReportInput {
  name: string;
  config: StackConfig;
  harness: string;
  steps: number;
  seed: number;
  temperature: number;
  candidate: string;
  curves: StepMetrics[];
  eval: EvalReport;
  wallSeconds: number;
  command: string;
}

/** The report's JSON: the fields the learning goal is judged on, the curves and the full evaluation. */
export function buildExperimentReport(input: ReportInput) {
  const o = input.eval.overall;
  const diff = o.difference;
  const base = o.baseline.successRate.estimate;
  const adapter = o.candidate.successRate.estimate;
  const callsBase = o.bothSolved.baselineToolCalls;
  const callsAdapter = o.bothSolved.candidateToolCalls;
  const fewerCalls = callsBase && callsAdapter !== null ? 1 - callsAdapter / callsBase : null;
  const better = diff.low !== null && diff.low > 0;
  const efficient = fewerCalls !== null && fewerCalls >= 0.2 && diff.low !== null && diff.low > -0.05;
  const verdict = better
    ? `the adapter beats the base: success ${pct(adapter)} vs ${pct(base)}, difference ${num(diff.estimate)} (95% CI ${num(diff.low)} .. ${num(diff.high)}) excludes 0`
    : efficient
      ? `the adapter needs ${(100 * fewerCalls!).toFixed(0)}% fewer tool calls on tasks both solved, success non-inferior (CI lower bound ${num(diff.low)} > -0.05)`
      : `not shown: success ${pct(adapter)} vs ${pct(base)}, difference ${num(diff.estimate)} (95% CI ${num(diff.low)} .. ${num(diff.high)}); tool calls on tasks both solved ${num(callsAdapter, 2)} vs ${num(callsBase, 2)}`;
  return {
    name: input.name,
    model: input.config.modelName,
    harness: input.harness,
    steps: input.steps,
    seed: input.seed,
    temperature: input.temperature,
    command: input.command,
    wallSeconds: input.wallSeconds,
    adapter: input.candidate,
    heldOut: { tasks: o.tasks, attempts: input.eval.attemptsPerTask },
    success: { base, adapter, diff: diff.estimate, ci95: [diff.low, diff.high] },
    callsPerSolved: { base: o.baseline.toolCallsPerSolved, adapter: o.candidate.toolCallsPerSolved },
    // Attempts with a call the guard blocked or a pass of a hack check: training must not teach
    // shortcuts (absent in reports written before the evaluation measured it).
    hackRate: {
      base: o.baseline.hackRate?.estimate ?? null,
      adapter: o.candidate.hackRate?.estimate ?? null,
      rose: o.hackRateRose ?? false,
    },
    callsOnBothSolved: {
      tasks: o.bothSolved.tasks,
      base: callsBase,
      adapter: callsAdapter,
      reduction: fewerCalls,
    },
    categories: input.eval.categories.map((c) => ({
      category: c.category,
      tasks: c.tasks,
      base: c.baseline.successRate.estimate,
      adapter: c.candidate.successRate.estimate,
      diff: c.difference.estimate,
      ci95: [c.difference.low, c.difference.high],
    })),
    // Rollouts an hour while training (steps 2..N): what an RL run on this machine can afford.
    throughput: trainingThroughput(input.curves),
    goalMet: better || efficient,
    verdict,
    curves: input.curves,
    evaluation: input.eval,
  };
}
type ExperimentReport = ReturnType<typeof buildExperimentReport>;

/**
 * Training throughput from the steps' finish times: the rollouts of steps 2..N over the time from
 * step 1's end to step N's. Step 1 is left out, since its time holds the stack's warm-up and the
 * base model's first load, and a resumed run's earlier steps count by their own clock, not the
 * resume's. Null with fewer than two steps.
 */
export function trainingThroughput(curves: StepMetrics[]): {
  rollouts: number;
  seconds: number;
  rolloutsPerHour: number;
  secondsPerStep: number;
} | null {
  if (curves.length < 2) return null;
  const sorted = [...curves].sort((a, b) => a.step - b.step);
  const seconds = (Date.parse(sorted.at(-1)!.finishedAt) - Date.parse(sorted[0]!.finishedAt)) / 1000;
  if (!(seconds > 0)) return null;
  const rollouts = sorted.slice(1).reduce((n, m) => n + m.rollouts, 0);
  return {
    rollouts,
    seconds: Math.round(seconds),
    rolloutsPerHour: Math.round((rollouts * 3600) / seconds),
    secondsPerStep: Math.round(seconds / (sorted.length - 1)),
  };
}

function writeReport(
  config: StackConfig,
  report: ExperimentReport,
  outDir: string,
  evalMarkdown: string,
): string[] {
  mkdirSync(outDir, { recursive: true });
  const stem = join(
    outDir,
    `experiment-${report.model}-${new Date().toISOString().slice(0, 10)}-${report.name}`,
  );
  writeFileSync(`${stem}.json`, `${JSON.stringify(report, null, 2)}\n`);
  const plots = spawnSync(
    join(config.venv, "bin", "python"),
    [join(repoRoot, "infra", "python", "plot_experiment.py"), `${stem}.json`, stem],
    {
      encoding: "utf8",
    },
  );
  const pngs = plots.status === 0 ? [`${stem}-curves.png`, `${stem}-heldout.png`] : [];
  writeFileSync(
    `${stem}.md`,
    renderMarkdown(report, evalMarkdown, pngs, plots.status === 0 ? null : plots.stderr),
  );
  return [`${stem}.md`, `${stem}.json`, ...pngs];
}

function renderMarkdown(
  r: ExperimentReport,
  evalMarkdown: string,
  pngs: string[],
  plotError: string | null,
): string {
  const rows = r.curves.map(
    (m) =>
      `| ${m.step} | ${num(m.meanReward)} | ${num(m.successRate, 2)} | ${num(m.meanToolCalls, 1)} | ${num(m.loss, 4)} | ${num(m.kl, 4)} | ${num(m.clipFraction, 3)} | ${num(m.logprobDiff, 3)} | ${m.tokensTrained} | ${m.applied ? `v${m.adapterVersion}` : "no-op"}${m.redraws ? ` (tasks drawn again ${m.redraws}x)` : ""} | ${formats(m.toolCallFormats)} | ${formats(m.stitching)} |`,
  );
  return [
    `# Experiment ${r.name}`,
    "",
    `${r.model} with ${r.harness}: ${r.steps} training steps, seed ${r.seed}, temperature ${r.temperature}, ${Math.round(r.wallSeconds / 60)} min.`,
    `Command: \`${r.command}\``,
    r.throughput
      ? `Training throughput: ${r.throughput.rolloutsPerHour} rollouts an hour (${r.throughput.rollouts} rollouts of steps 2-${r.steps} in ${Math.round(r.throughput.seconds / 60)} min, ${r.throughput.secondsPerStep} s a step).`
      : "Training throughput: not measured (fewer than two steps).",
    "",
    `**Verdict:** ${r.verdict}.`,
    "",
    `Held-out: ${r.heldOut.tasks} tasks x ${r.heldOut.attempts} attempt(s), both arms with the same seeds.`,
    `Hack rate (attempts with a call the guard blocked or a hack-check pass): adapter ${pct(r.hackRate.adapter)}, base ${pct(r.hackRate.base)}${r.hackRate.rose ? ": **the adapter's hack rate rose**" : ""}.`,
    "",
    "## Training curves",
    "",
    "| step | reward | success | tool calls | loss | KL to base | clip frac | logprob diff | tokens trained | adapter | call formats | calls stitched by |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
    "",
    ...pngs.map(
      (p) =>
        `![${p.endsWith("curves.png") ? "training curves" : "held-out success"}](${p.split("/").at(-1)})`,
    ),
    ...(plotError ? [`Plots failed: ${plotError.trim().split("\n").at(-1)}`] : []),
    "",
    "## Held-out evaluation",
    "",
    evalMarkdown,
  ].join("\n");
}

const formats = (f: Record<string, number> | undefined) =>
  Object.entries(f ?? {})
    .map(([k, v]) => `${k} ${v}`)
    .join(", ") || "none";

function printCurves(curves: StepMetrics[], say: Say): void {
  say("");
  say("step  reward  success  calls  loss     KL       logprob-diff  tokens");
  for (const m of curves)
    say(
      `${String(m.step).padEnd(5)} ${num(m.meanReward).padEnd(7)} ${num(m.successRate, 2).padEnd(8)} ${num(m.meanToolCalls, 1).padEnd(6)} ${num(m.loss, 4).padEnd(8)} ${num(m.kl, 4).padEnd(8)} ${num(m.logprobDiff, 3).padEnd(13)} ${m.tokensTrained}`,
    );
}
