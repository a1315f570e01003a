import { readFile } from "node:fs/promises";
import { TaskResult } from "@bridle/contracts";
import { PoolError, poolByTask, renderPooled } from "@bridle/evaluation";
import { z } from "zod";

export const poolUsage = `  experiment pool REPORT.json ...
                     pools experiment reports judged on the same held-out tasks at the same
                     settings (model, harness, steps, temperature, attempts): each task's
                     adapter-minus-base difference averaged over the runs, a 95% t-interval over
                     the tasks; --json prints the figures as JSON`;

/** What pooling reads from an experiment report's JSON (the rest of the report is left alone). */
const Report = z.object({
  name: z.string(),
  model: z.string(),
  harness: z.string(),
  steps: z.number(),
  temperature: z.number(),
  heldOut: z.object({ attempts: z.number() }),
  evaluation: z.object({ byTask: z.array(TaskResult).default([]) }),
});
type Report = z.infer<typeof Report>;

/** The settings every pooled run must share, as the report names them. */
const SHARED = {
  model: (r: Report) => r.model,
  harness: (r: Report) => r.harness,
  steps: (r: Report) => r.steps,
  temperature: (r: Report) => r.temperature,
  "heldOut.attempts": (r: Report) => r.heldOut.attempts,
};

async function readReport(file: string): Promise<Report> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch {
    throw new PoolError(`cannot read ${file}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new PoolError(`${file} is not JSON (give the experiment's .json report)`);
  }
  const parsed = Report.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new PoolError(
      `${file} is not an experiment report: ${issue.path.join(".") || "the document"}: ${issue.message}`,
    );
  }
  return parsed.data;
}

/**
 * `bridle experiment pool REPORT.json ...`: the pooled, paired adapter-vs-base figure over several
 * experiment runs on the same held-out tasks. Returns the exit code: 0, 1 when the reports cannot be
 * pooled (named), 2 without reports.
 */
export async function poolCommand(
  files: string[],
  flags: { json?: boolean },
  say: (line: string) => void,
): Promise<number> {
  if (files.length === 0) {
    process.stderr.write(`bridle experiment pool: give the experiments' JSON reports\n\n${poolUsage}\n`);
    return 2;
  }
  try {
    const reports = await Promise.all(files.map(readReport));
    const first = reports[0]!;
    for (const [i, r] of reports.entries())
      for (const [setting, of] of Object.entries(SHARED))
        if (of(r) !== of(first))
          throw new PoolError(
            `${files[i]} has ${setting} ${JSON.stringify(of(r))}, ${files[0]} has ${JSON.stringify(of(first))}: only runs at the same settings pool`,
          );
    const names = new Set<string>();
    for (const [i, r] of reports.entries()) {
      if (names.has(r.name)) throw new PoolError(`${files[i]}: run ${r.name} is given twice`);
      names.add(r.name);
    }
    const pooled = poolByTask(reports.map((r) => ({ name: r.name, byTask: r.evaluation.byTask })));
    if (flags.json) say(JSON.stringify(pooled, null, 2));
    else {
      say(
        `${first.model} under ${first.harness}, ${first.steps} steps, temperature ${first.temperature}, ${first.heldOut.attempts} attempts a task`,
      );
      say(renderPooled(pooled).trimEnd());
    }
    return 0;
  } catch (err) {
    if (!(err instanceof PoolError)) throw err;
    process.stderr.write(`bridle experiment pool: ${err.message}\n`);
    return 1;
  }
}
