import type { EvalConfig, EvalOutcome, EvalOutput } from "@bridle/contracts";
import { buildReport, renderMarkdown } from "@bridle/evaluation";
import { mapBounded } from "@bridle/service-kit/limit";
import { patched, setHandler, workflowInfo } from "@temporalio/workflow";
import {
  admit,
  heldOutTasks,
  jobProgress,
  measuringRollout,
  resolveServed,
  runRollout,
  writeReport,
} from "./job.ts";
import { actOnVerdict } from "./lineage.ts";

/**
 * Adapter vs base model (or two adapter versions) on held-out tasks with the harness fixed: N
 * attempts per task, paired per task, environment failures listed apart, and which model served
 * each rollout. The report is returned and written as JSON and Markdown.
 */
export async function evaluation(config: EvalConfig & { id: string }): Promise<EvalOutput> {
  const { tasks, served } = await admit(
    async () => {
      const tasks = await heldOutTasks({
        limit: config.limit,
        judged: true,
        ...(config.tasks ? { ids: config.tasks } : {}),
        ...(config.unproven ? { unproven: true } : {}),
      });
      const served = {
        candidate: { model: config.candidate, ...(await resolveServed(config.candidate)) },
        baseline: { model: config.baseline, ...(await resolveServed(config.baseline)) },
      };
      return { tasks, served };
    },
    ({ tasks }) => tasks.length * 2 * config.attempts,
  );
  const jobs = tasks.flatMap((task) =>
    (["candidate", "baseline"] as const).flatMap((arm) =>
      Array.from({ length: config.attempts }, (_, attempt) => ({ task, arm, attempt })),
    ),
  );
  let done = 0;
  setHandler(jobProgress, () => ({ done, total: jobs.length }));

  const outcomes = await mapBounded(
    jobs,
    config.concurrency,
    async ({ task, arm, attempt }): Promise<EvalOutcome> => {
      const model = arm === "candidate" ? config.candidate : config.baseline;
      const rolloutId = `${config.id}/${task.id}/${arm}/${attempt}`;
      // Both arms of one (task, attempt) sample with the same seed: paired, common random numbers.
      const result = await runRollout(
        measuringRollout(config, {
          rolloutId,
          taskId: task.id,
          model,
          seedKey: `${task.id}/${attempt}`,
          labels: { eval: config.id, arm },
        }),
      );
      done++;
      const failed = result.environmentFailure;
      return {
        rolloutId,
        taskId: task.id,
        category: task.category,
        arm,
        attempt,
        correct: failed ? null : result.correctness === 1 && result.blocked.length === 0,
        toolCalls: result.toolCalls.guard,
        blocked: result.blocked.map((b) => b.rule ?? "unnamed"),
        servedBy: { ...served[arm], model: result.servedModels[0] ?? model },
        ...(failed ? { failure: `${failed.stage}: ${failed.reason}` } : {}),
        ...(result.rewardDetails ? { rewardDetails: result.rewardDetails } : {}),
        // Histories from before hack-check tasks carry no flag: none of their tasks was one.
        impossible: task.impossible ?? false,
        // Histories from before unproven tasks carry no flag: none of their tasks was one.
        unproven: task.unproven ?? false,
      };
    },
  );

  const report = buildReport({
    candidate: config.candidate,
    baseline: config.baseline,
    harness: config.harness,
    attemptsPerTask: config.attempts,
    temperature: config.temperature,
    outcomes,
    ...(config.promotionMargin === undefined ? {} : { promotionMargin: config.promotionMargin }),
  });
  const markdown = renderMarkdown(report);
  const files = await writeReport({ id: workflowInfo().workflowId, report, markdown });
  // The verdict acts on the candidate's lineage: a promotion, a rollback, or nothing.
  const decision = patched("lineage-decisions") ? await actOnVerdict(config, report) : null;
  return { id: config.id, report, markdown, files, decision };
}
