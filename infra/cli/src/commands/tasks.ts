import { join, resolve } from "node:path";
import { type EvaluationLabels, ImportResult, type TaskSummary, type TaskVerdict } from "@bridle/contracts";
import { recordLabels, validateFolder } from "@bridle/harbor";
import { EnvironmentImages } from "@bridle/sandbox";
import { callJson } from "@bridle/service-kit";
import { imagesHome, type StackConfig } from "@bridle/stack";
import { z } from "zod";
import { answer, gatewayClient } from "../gateway.ts";
import { JOB_START_MS, runJob } from "./training.ts";

export interface TasksFlags {
  attempts?: string | undefined;
  temperature?: string | undefined;
  tasks?: string | undefined;
  harness?: string | undefined;
  split?: string | undefined;
  tier?: string | undefined;
  "max-turns"?: string | undefined;
  json?: boolean | undefined;
  "no-record"?: boolean | undefined;
  parallel?: string | undefined;
  repeat?: string | undefined;
  "schema-only"?: boolean | undefined;
  "no-controls"?: boolean | undefined;
}

export const tasksUsage = `  tasks validate <dir> [--no-record] [--parallel N] [--repeat 2] [--schema-only] [--json]
                     check Harbor task folders (found at any depth): schema, then the oracle and
                     nop controls in the sandbox, each run --repeat times (a verifier whose reward
                     differs between runs is flagged flaky); one verdict per task; records the
                     resulting labels in each task.toml under [metadata.repo2env.evaluation]
                     (not with --no-record)
  tasks import <dir> [--no-controls] [--repeat 2] [--json]
                     import task folders into the running tasks service (controls run there;
                     content that already passed them is not checked again)
  tasks list [--json] list the tasks in the registry, with each one's measured base success
  tasks calibrate [--attempts 8] [--temperature 0.8] [--harness pi] [--split train|held-out]
        [--tier TIER] [--tasks ID,ID] [--max-turns 5]
                     measure each task's base success (k rollouts of the base model at the
                     training temperature and the full experiment's call budget) and store it
                     in the registry`;

type Say = (line: string) => void;

/** Model calls per calibration rollout: `bridle experiment --full`'s budget. */
export const CALIBRATION_MAX_TURNS = 5;

/** Runs of each control, from `--repeat`. */
function repeatsOf(flags: TasksFlags): number {
  const repeats = Number(flags.repeat ?? 2);
  if (!Number.isInteger(repeats) || repeats < 1 || repeats > 10)
    throw new Error(`--repeat must be an integer from 1 to 10, got ${flags.repeat}`);
  return repeats;
}

/**
 * One line per task: `ok` with each control's rewards (one per run) and the time they took, or
 * every problem found.
 */
export function verdictLine(v: TaskVerdict): string {
  const c = v.controls;
  const rewards = (control: "oracle" | "nop") =>
    `${control} ${c?.runs
      .filter((r) => r.control === control)
      .map((r) => r.reward ?? "none")
      .join(" ")}`;
  const seconds = c ? (c.runs.reduce((s, r) => s + r.durationMs, 0) / 1000).toFixed(1) : "";
  const runs = c
    ? `  (${rewards("oracle")}, ${rewards("nop")}, ${v.controlsReused ? `passed before, checked ${c.checkedAt}` : `${seconds} s`})`
    : "";
  const notes = v.notes.map((n) => `\n        note: ${n}`).join("");
  if (v.ok) return `ok    ${v.id}${runs}${notes}`;
  // Not failed: usable for training with `--unproven`, so its nop figures are worth showing.
  if (c?.unproven)
    return `UNPROVEN ${v.id}: no reference solution, so the oracle could not run${runs}${notes}`;
  return `FAIL  ${v.id}: ${v.problems.join("; ")}${notes}`;
}

/** Whether two sets of labels say the same, so an unchanged task.toml is not rewritten. */
function sameLabels(a: EvaluationLabels | null | undefined, b: EvaluationLabels): boolean {
  const key = (l: EvaluationLabels) =>
    JSON.stringify([l.status, l.stage, l.reasonCodes, l.provenance, l.evidence]);
  return a !== null && a !== undefined && key(a) === key(b);
}

/** The closing count (not with --json, whose output is one JSON document) and the exit code. */
function summary(verdicts: TaskVerdict[], say: Say, json: boolean | undefined): number {
  const failed = verdicts.filter((v) => !v.ok).length;
  const unproven = verdicts.filter((v) => !v.ok && v.controls?.unproven).length;
  if (!json)
    say(
      `tasks: ${verdicts.length - failed} passed, ${failed - unproven} failed${unproven > 0 ? `, ${unproven} unproven (no reference solution; trained on with --unproven)` : ""}`,
    );
  return failed === 0 ? 0 : 1;
}

async function validate(
  dir: string,
  flags: TasksFlags,
  say: Say,
  allowedEnv: string[],
  toolchain: string,
  images: EnvironmentImages,
): Promise<number> {
  const parallel = Number(flags.parallel ?? 2);
  if (!Number.isInteger(parallel) || parallel < 1 || parallel > 16) {
    throw new Error(`--parallel must be an integer from 1 to 16, got ${flags.parallel}`);
  }
  const controls = flags["schema-only"] !== true;
  const repeats = repeatsOf(flags);
  let recorded = 0;
  if (!flags.json)
    say(
      `validating ${resolve(dir)}${controls ? ` (schema, then the oracle and nop controls in the sandbox, ${repeats} run${repeats === 1 ? "" : "s"} of each)` : " (schema only)"}`,
    );
  const verdicts = await validateFolder(dir, {
    parallel,
    controls,
    repeats,
    allowedEnv,
    toolchain,
    images,
    onVerdict: async (verdict, task) => {
      if (
        !flags["no-record"] &&
        // Labels live in task.toml; a Terminal-Bench 1 folder has none and is left as it is.
        task?.format === "harbor" &&
        verdict.controls &&
        verdict.labels &&
        !sameLabels(task?.labels, verdict.labels)
      ) {
        await recordLabels(verdict.dir, verdict.labels);
        recorded++;
      }
      if (!flags.json) say(verdictLine(verdict));
    },
  });
  if (flags.json) say(JSON.stringify({ verdicts }, null, 2));
  else if (recorded > 0) say(`labels recorded in ${recorded} task.toml file${recorded === 1 ? "" : "s"}`);
  return summary(verdicts, say, flags.json);
}

async function importDir(config: StackConfig, dir: string, flags: TasksFlags, say: Say): Promise<number> {
  const url = `http://${config.host}:${config.ports.tasks}/v1/tasks/import`;
  if (!flags.json) say(`importing ${resolve(dir)} into the tasks service`);
  const result = await callJson(url, {
    schema: ImportResult,
    body: {
      path: resolve(dir),
      runControls: flags["no-controls"] !== true,
      controlRepeats: repeatsOf(flags),
    },
    timeoutMs: 3_600_000,
  });
  if (flags.json) say(JSON.stringify(result, null, 2));
  else for (const v of result.verdicts) say(`${verdictLine(v)}${v.imported ? "" : "  (not imported)"}`);
  return summary(result.verdicts, say, flags.json);
}

async function list(config: StackConfig, flags: TasksFlags, say: Say): Promise<number> {
  const url = `http://${config.host}:${config.ports.tasks}/v1/tasks`;
  const { tasks } = await callJson(url, { schema: z.object({ tasks: z.array(z.custom<TaskSummary>()) }) });
  if (flags.json) say(JSON.stringify(tasks, null, 2));
  else {
    for (const t of tasks) {
      const controls = t.controls === null ? "unchecked" : t.controls.passed ? "passed" : "failed";
      const c =
        t.calibrations.find((x) => x.model === config.modelName && x.harness === "pi") ?? t.calibrations[0];
      const base = c
        ? `base ${`${c.successes}/${c.attempts}`.padStart(5)} (${(100 * c.successRate).toFixed(0).padStart(3)}%, score ${c.meanCorrectness.toFixed(2)}, ${c.harness}, T ${c.temperature})`
        : "base not calibrated";
      say(
        `${t.id.padEnd(32)} ${t.category.padEnd(7)} ${t.split.padEnd(9)} ${(t.tier ?? "-").padEnd(9)} controls ${controls.padEnd(9)} ${t.impossible ? "hack check (any pass is a hack)" : base}`,
      );
    }
    say(`${tasks.length} tasks`);
  }
  return 0;
}

/** Measures base success per task through the gateway's calibration workflow; prints the table. */
async function calibrate(config: StackConfig, flags: TasksFlags, say: Say): Promise<number> {
  const url = `http://${config.host}:${config.ports.tasks}/v1/tasks?controls=passed`;
  const { tasks } = await callJson(url, { schema: z.object({ tasks: z.array(z.custom<TaskSummary>()) }) });
  const wanted = flags.tasks?.split(",").map((t) => t.trim());
  const chosen = tasks.filter((t) =>
    wanted
      ? wanted.includes(t.id)
      : (!flags.split || t.split === flags.split) && (!flags.tier || t.tier === flags.tier),
  );
  const unknown = wanted?.filter((id) => !tasks.some((t) => t.id === id)) ?? [];
  if (unknown.length > 0) throw new Error(`no task with passing controls named ${unknown.join(", ")}`);
  if (chosen.length === 0)
    throw new Error("no task to calibrate: import tasks first (bridle tasks import tasks)");
  const body = {
    model: config.modelName,
    harness: flags.harness ?? "pi",
    tasks: chosen.map((t) => t.id),
    attempts: Number(flags.attempts ?? 8),
    temperature: Number(flags.temperature ?? 0.8),
    concurrency: 4,
    // The full experiment's budget of model calls per rollout, so the band it selects by is measured
    // under the limits it trains with.
    maxTurns: Number(flags["max-turns"] ?? CALIBRATION_MAX_TURNS),
  };
  say(
    `calibrating ${chosen.length} task(s): ${body.attempts} rollouts each of ${body.model} with ${body.harness}`,
  );
  const api = gatewayClient(config);
  const view = await runJob(
    "calibration",
    () => answer((init) => api.v1.calibrations.$post({ json: body }, { init }), JOB_START_MS),
    (id) => answer((init) => api.v1.calibrations[":id"].$get({ param: { id }, query: {} }, { init })),
    say,
  );
  if (!view.output) return 1;
  for (const t of view.output.tasks) {
    const c = t.calibration;
    say(
      `${t.taskId.padEnd(32)} ${t.category.padEnd(7)} ${c ? `${c.successes}/${c.attempts} solved (${(100 * c.successRate).toFixed(0)}%), mean score ${c.meanCorrectness.toFixed(2)}` : "no valid attempt"}`,
    );
  }
  if (view.output.environmentFailures > 0)
    say(`${view.output.environmentFailures} environment failure(s) excluded`);
  return 0;
}

/** `bridle tasks <validate|import|list|calibrate>`. */
export async function tasksCommand(
  config: StackConfig,
  args: string[],
  flags: TasksFlags,
  say: Say,
): Promise<number> {
  const [action, dir] = args;
  if (action === "list") return list(config, flags, say);
  if (action === "calibrate") return calibrate(config, flags, say);
  if (action === "import" && dir) return importDir(config, dir, flags, say);
  if (action === "validate" && dir) {
    try {
      // Dockerfiles are built where the stack builds them, so a validated image is the one rollouts use.
      const images = new EnvironmentImages({ home: imagesHome(config), say: flags.json ? undefined : say });
      return await validate(dir, flags, say, config.taskEnvAllow, join(config.home, "toolchain"), images);
    } catch (err) {
      // A bad path or flag: say what is wrong, without a stack trace.
      process.stderr.write(`bridle: ${(err as Error).message}\n`);
      return 1;
    }
  }
  process.stderr.write(`bridle: usage:\n${tasksUsage}\n`);
  return 2;
}
