import { resolve } from "node:path";
import { type EvaluationLabels, ImportResult, type TaskSummary, type TaskVerdict } from "@bridle/contracts";
import { recordLabels, validateFolder } from "@bridle/harbor";
import { callJson } from "@bridle/service-kit";
import { z } from "zod";
import type { StackConfig } from "../stack/index.ts";

export interface TasksFlags {
  json?: boolean | undefined;
  "no-record"?: boolean | undefined;
  parallel?: string | undefined;
  "schema-only"?: boolean | undefined;
  "no-controls"?: boolean | undefined;
}

export const tasksUsage = `  tasks validate <dir> [--no-record] [--parallel N] [--schema-only] [--json]
                     check Harbor task folders: schema, then the oracle and nop controls in the
                     sandbox; one verdict per task; records the resulting labels in
                     each task.toml under [metadata.repo2env.evaluation] (not with --no-record)
  tasks import <dir> [--no-controls] [--json]
                     import task folders into the running tasks service (controls run there)
  tasks list [--json] list the tasks in the registry`;

type Say = (line: string) => void;

/** One line per task: `ok`, or every problem found. */
function verdictLine(v: TaskVerdict): string {
  const runs = v.controls?.runs.map((r) => `${r.control} ${r.reward ?? "null"}`).join(", ");
  const seconds = v.controls
    ? ` ${(v.controls.runs.reduce((s, r) => s + r.durationMs, 0) / 1000).toFixed(1)} s`
    : "";
  if (v.ok) return `ok    ${v.id}${runs ? `  (${runs},${seconds})` : ""}`;
  return `FAIL  ${v.id}: ${v.problems.join("; ")}`;
}

/** Whether two sets of labels say the same, so an unchanged task.toml is not rewritten. */
function sameLabels(a: EvaluationLabels | null | undefined, b: EvaluationLabels): boolean {
  const key = (l: EvaluationLabels) =>
    JSON.stringify([l.status, l.stage, l.reasonCodes, l.provenance, l.evidence]);
  return a !== null && a !== undefined && key(a) === key(b);
}

function summary(verdicts: TaskVerdict[], say: Say): number {
  const failed = verdicts.filter((v) => !v.ok).length;
  say(`tasks: ${verdicts.length - failed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

async function validate(dir: string, flags: TasksFlags, say: Say): Promise<number> {
  const parallel = Number(flags.parallel ?? 2);
  if (!Number.isInteger(parallel) || parallel < 1 || parallel > 16) {
    throw new Error(`--parallel must be an integer from 1 to 16, got ${flags.parallel}`);
  }
  const controls = flags["schema-only"] !== true;
  let recorded = 0;
  if (!flags.json)
    say(
      `validating ${resolve(dir)}${controls ? " (schema, then oracle and nop controls in the sandbox)" : " (schema only)"}`,
    );
  const verdicts = await validateFolder(dir, {
    parallel,
    controls,
    onVerdict: async (verdict, task) => {
      if (
        !flags["no-record"] &&
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
  return summary(verdicts, say);
}

async function importDir(config: StackConfig, dir: string, flags: TasksFlags, say: Say): Promise<number> {
  const url = `http://${config.host}:${config.ports.tasks}/v1/tasks/import`;
  if (!flags.json) say(`importing ${resolve(dir)} into the tasks service`);
  const result = await callJson(url, {
    schema: ImportResult,
    body: { path: resolve(dir), runControls: flags["no-controls"] !== true },
    timeoutMs: 3_600_000,
  });
  if (flags.json) say(JSON.stringify(result, null, 2));
  else for (const v of result.verdicts) say(`${verdictLine(v)}${v.imported ? "" : "  (not imported)"}`);
  return summary(result.verdicts, say);
}

async function list(config: StackConfig, flags: TasksFlags, say: Say): Promise<number> {
  const url = `http://${config.host}:${config.ports.tasks}/v1/tasks`;
  const { tasks } = await callJson(url, { schema: z.object({ tasks: z.array(z.custom<TaskSummary>()) }) });
  if (flags.json) say(JSON.stringify(tasks, null, 2));
  else {
    for (const t of tasks) {
      const controls = t.controls === null ? "unchecked" : t.controls.passed ? "passed" : "failed";
      say(`${t.id.padEnd(32)} ${t.category.padEnd(7)} ${t.split.padEnd(9)} controls ${controls}`);
    }
    say(`${tasks.length} tasks`);
  }
  return 0;
}

/** `bridle tasks <validate|import|list>`. */
export async function tasksCommand(
  config: StackConfig,
  args: string[],
  flags: TasksFlags,
  say: Say,
): Promise<number> {
  const [action, dir] = args;
  if (action === "list") return list(config, flags, say);
  if (action === "import" && dir) return importDir(config, dir, flags, say);
  if (action === "validate" && dir) {
    try {
      return await validate(dir, flags, say);
    } catch (err) {
      // A bad path or flag: say what is wrong, without a stack trace.
      process.stderr.write(`bridle: ${(err as Error).message}\n`);
      return 1;
    }
  }
  process.stderr.write(`bridle: usage:\n${tasksUsage}\n`);
  return 2;
}
