import type { TaskResult } from "@bridle/contracts";
import { type Interval, mean, meanInterval } from "./stats.ts";

/** One evaluation to pool: its name and each task's solved attempts per arm. */
export interface PoolRun {
  name: string;
  byTask: readonly TaskResult[];
}

export interface PooledTask {
  taskId: string;
  category: string;
  /** Candidate minus baseline success rate, one per run, in the runs' order. */
  differences: number[];
  /** Their mean: the task's pooled difference. */
  difference: number;
  candidate: { solved: number; attempts: number };
  baseline: { solved: number; attempts: number };
}

export interface Pooled {
  runs: { name: string; difference: number }[];
  tasks: PooledTask[];
  candidate: { solved: number; attempts: number };
  baseline: { solved: number; attempts: number };
  /** The mean over tasks of each task's pooled difference, with a 95% t-interval over tasks. */
  difference: Interval;
}

/** Why a set of evaluations cannot be pooled, naming the run and task at fault. */
export class PoolError extends Error {
  override name = "PoolError";
}

const rate = (arm: { solved: number; attempts: number }) => arm.solved / arm.attempts;

/**
 * Pools several evaluations of the same held-out tasks by task: each task's candidate-minus-baseline
 * success rate is averaged over the runs, and the interval is a t-interval over those task means,
 * the same unit as one run's paired interval. Hack-check tasks stay outside, as in one run. Every
 * run must cover the same tasks, each with at least one valid attempt per arm.
 */
export function poolByTask(runs: readonly PoolRun[]): Pooled {
  if (runs.length === 0) throw new PoolError("nothing to pool: give at least one evaluation");
  const real = runs.map((run) => {
    if (run.byTask.length === 0)
      throw new PoolError(`${run.name}: no per-task results (written before reports kept them)`);
    const tasks = new Map<string, TaskResult>();
    for (const t of run.byTask) {
      if (t.impossible) continue;
      if (tasks.has(t.taskId)) throw new PoolError(`${run.name}: task ${t.taskId} appears twice`);
      if (t.candidate.attempts === 0 || t.baseline.attempts === 0)
        throw new PoolError(`${run.name}: task ${t.taskId} has no valid attempt in one arm`);
      tasks.set(t.taskId, t);
    }
    return { name: run.name, tasks };
  });
  const first = real[0]!;
  for (const run of real.slice(1)) {
    for (const id of first.tasks.keys())
      if (!run.tasks.has(id)) throw new PoolError(`${run.name}: task ${id} of ${first.name} is missing`);
    for (const id of run.tasks.keys())
      if (!first.tasks.has(id)) throw new PoolError(`${run.name}: task ${id} is not in ${first.name}`);
  }
  const sum = (results: TaskResult[], arm: "candidate" | "baseline") => ({
    solved: results.reduce((n, t) => n + t[arm].solved, 0),
    attempts: results.reduce((n, t) => n + t[arm].attempts, 0),
  });
  const tasks = [...first.tasks.values()].map((t): PooledTask => {
    const results = real.map((run) => run.tasks.get(t.taskId)!);
    const differences = results.map((r) => rate(r.candidate) - rate(r.baseline));
    return {
      taskId: t.taskId,
      category: t.category,
      differences,
      difference: mean(differences),
      candidate: sum(results, "candidate"),
      baseline: sum(results, "baseline"),
    };
  });
  const all = real.flatMap((run) => [...run.tasks.values()]);
  return {
    runs: real.map((run) => ({
      name: run.name,
      difference: mean([...run.tasks.values()].map((t) => rate(t.candidate) - rate(t.baseline))),
    })),
    tasks,
    candidate: sum(all, "candidate"),
    baseline: sum(all, "baseline"),
    difference: meanInterval(
      tasks.map((t) => t.difference),
      [-1, 1],
    ),
  };
}

const points = (x: number) => `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}`;

/** The pooled result as Markdown: the verdict, each run's own difference, and each task. */
export function renderPooled(p: Pooled): string {
  const d = p.difference;
  const excludesZero = d.low > 0 || d.high < 0;
  const lines = [
    `Pooled over ${p.runs.length} run(s) and ${p.tasks.length} held-out tasks (each task's difference averaged over the runs, a 95% t-interval over tasks):`,
    "",
    `- adapter ${p.candidate.solved}/${p.candidate.attempts}, base ${p.baseline.solved}/${p.baseline.attempts}`,
    `- difference **${points(d.estimate)} points, 95% CI [${points(d.low)}, ${points(d.high)}]**: ${
      excludesZero
        ? d.low > 0
          ? "the adapters beat the base"
          : "the base beats the adapters"
        : "the interval holds 0"
    }`,
    "",
    "| run | difference (points) |",
    "| --- | --- |",
    ...p.runs.map((r) => `| ${r.name} | ${points(r.difference)} |`),
    "",
    "| task | category | adapter | base | difference (points) |",
    "| --- | --- | --- | --- | --- |",
    ...p.tasks.map(
      (t) =>
        `| ${t.taskId} | ${t.category} | ${t.candidate.solved}/${t.candidate.attempts} | ${t.baseline.solved}/${t.baseline.attempts} | ${points(t.difference)} |`,
    ),
  ];
  return `${lines.join("\n")}\n`;
}
