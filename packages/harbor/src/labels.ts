import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ControlResults, EvaluationLabels } from "@bridle/contracts";
import { NO_SOLUTION } from "./controls.ts";
import { parseTaskToml } from "./task-toml.ts";

/** Repo2RLEnv labels after our controls: verified, or needs_repair with a reason code per failure. */
export function labelsFromControls(controls: ControlResults): EvaluationLabels {
  const reasonCodes = [
    ...new Set(
      controls.runs
        .filter((run) => !run.passed)
        .map((run) =>
          run.message === NO_SOLUTION
            ? "oracle_no_solution"
            : `${run.control}_${run.reward === null ? "environment_failure" : run.control === "oracle" ? "failed" : "passed"}`,
        ),
    ),
    ...controls.flaky.map((control) => `${control}_flaky`),
  ];
  return {
    status: controls.passed ? "verified" : "needs_repair",
    stage: "controls",
    reasonCodes,
    provenance: "bridle tasks validate",
    evidence: evidenceOf(controls),
  };
}

/**
 * Each control's reward and message: once when its runs agree (the same line for one run or
 * several, so a re-check does not rewrite an unchanged task.toml), every run when they differ.
 */
function evidenceOf(controls: ControlResults): string {
  return (["oracle", "nop"] as const)
    .flatMap((control) => {
      const runs = controls.runs.filter((r) => r.control === control);
      const agree = runs.every((r) => r.reward === runs[0]?.reward && r.message === runs[0]?.message);
      return (agree ? runs.slice(0, 1) : runs).map(
        (run) => `${control}${agree ? "" : ` #${run.attempt}`}: reward ${run.reward} (${run.message})`,
      );
    })
    .join("; ");
}

const quote = (text: string) => JSON.stringify(text);

/**
 * Records labels in a task's `task.toml` under `[metadata.repo2env.evaluation]`, replacing that
 * table and leaving the rest of the file (comments included) as it was. The result is parsed
 * again before it is written, so a file is never left broken.
 */
export async function recordLabels(taskDir: string, labels: EvaluationLabels): Promise<void> {
  const path = join(taskDir, "task.toml");
  const lines = (await readFile(path, "utf8")).split("\n");
  const start = lines.findIndex((line) => /^\s*\[metadata\.repo2env\.evaluation\]\s*(#.*)?$/.test(line));
  if (start >= 0) {
    let end = start + 1;
    while (end < lines.length && !/^\s*\[/.test(lines[end] ?? "")) end++;
    lines.splice(start, end - start);
  }
  while (lines.length > 0 && lines[lines.length - 1]?.trim() === "") lines.pop();
  lines.push(
    "",
    "[metadata.repo2env.evaluation]",
    `status = ${quote(labels.status)}`,
    `stage = ${quote(labels.stage)}`,
    `reason_codes = [${labels.reasonCodes.map(quote).join(", ")}]`,
    ...(labels.provenance ? [`provenance = ${quote(labels.provenance)}`] : []),
    ...(labels.evidence ? [`evidence = ${quote(labels.evidence)}`] : []),
    "",
  );
  const text = lines.join("\n");
  const check = parseTaskToml(text);
  if (!check.ok) throw new Error(`cannot record labels in ${path}: ${check.problems.join("; ")}`);
  await writeFile(path, text);
}
