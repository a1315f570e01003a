import type { CalibrationConfig, CalibrationOutput, RolloutResult } from "@bridle/contracts";
import { mapBounded } from "@bridle/service-kit/limit";
import { setHandler } from "@temporalio/workflow";
import { admit, heldOutTasks, jobProgress, measuringRollout, recordCalibration, runRollout } from "./job.ts";

/**
 * Measures each task's base success: k rollouts of one model in one harness at the training
 * temperature, scored as an evaluation scores them (no bonus; a blocked call fails the attempt).
 * Each task's figure goes into the task registry, tied to the task content it was measured on.
 */
export async function calibration(config: CalibrationConfig & { id: string }): Promise<CalibrationOutput> {
  const tasks = await admit(
    () => heldOutTasks({ limit: config.tasks.length, ids: config.tasks }),
    (tasks) => tasks.length * config.attempts,
  );
  const jobs = tasks.flatMap((task) =>
    Array.from({ length: config.attempts }, (_, attempt) => ({ task, attempt })),
  );
  let done = 0;
  setHandler(jobProgress, () => ({ done, total: jobs.length }));
  const results = await mapBounded(jobs, config.concurrency, async ({ task, attempt }) => {
    const result = await runRollout(
      measuringRollout(config, {
        rolloutId: `${config.id}/${task.id}/${attempt}`,
        taskId: task.id,
        model: config.model,
        seedKey: `${task.id}/${attempt}`,
        labels: { calibration: config.id },
      }),
    );
    done++;
    return { task, result };
  });
  const measuredAt = new Date().toISOString();
  const output: CalibrationOutput = { id: config.id, tasks: [], environmentFailures: 0 };
  for (const task of tasks) {
    const all = results.filter((r) => r.task.id === task.id).map((r) => r.result);
    const valid = all.filter((r): r is RolloutResult & { correctness: number } => r.correctness !== null);
    output.environmentFailures += all.length - valid.length;
    if (valid.length === 0) {
      output.tasks.push({ taskId: task.id, category: task.category, calibration: null });
      continue;
    }
    const solved = valid.filter((r) => r.correctness === 1 && r.blocked.length === 0);
    const record = {
      model: config.model,
      harness: config.harness,
      temperature: config.temperature,
      attempts: valid.length,
      successes: solved.length,
      successRate: solved.length / valid.length,
      meanCorrectness: valid.reduce((s, r) => s + r.correctness, 0) / valid.length,
      toolCallsPerSolved:
        solved.length === 0 ? null : solved.reduce((s, r) => s + r.toolCalls.guard, 0) / solved.length,
      taskHash: task.hash,
      measuredAt,
    };
    await recordCalibration({ taskId: task.id, record });
    output.tasks.push({ taskId: task.id, category: task.category, calibration: record });
  }
  return output;
}
