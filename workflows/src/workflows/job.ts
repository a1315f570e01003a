import { type JobAdmission, type JobProgress, type RolloutRequest, TaskQueues } from "@bridle/contracts";
import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  condition,
  defineQuery,
  defineUpdate,
  proxyActivities,
  setHandler,
} from "@temporalio/workflow";
import type { Activities } from "../activities.ts";
import { rolloutSeed } from "./seed.ts";

/** What a finite job of rollouts (an evaluation, a calibration) calls, with the same retry policy. */
export const { heldOutTasks, resolveServed, writeReport, recordCalibration } = proxyActivities<Activities>({
  startToCloseTimeout: "2 minutes",
  retry: { maximumAttempts: 10 },
});
export const { runRollout } = proxyActivities<Activities>({
  taskQueue: TaskQueues.rollout,
  startToCloseTimeout: "6 hours",
  heartbeatTimeout: "30 seconds",
  retry: { initialInterval: "5 seconds", maximumInterval: "2 minutes", maximumAttempts: 20 },
});

/** The rollout limits and sampling a job's configuration carries (an evaluation's, a calibration's). */
interface JobSampling {
  harness: string;
  temperature: number;
  seed: number;
  maxTurns: number;
  contextWindow: number;
  agentTimeoutSec?: number | undefined;
}

/**
 * One measuring rollout of a job: no capture, blocked calls blocked, scored for evaluation. Its seed
 * comes from the job's seed and `seedKey` alone, so two arms that share a key sample alike.
 */
export function measuringRollout(
  config: JobSampling,
  rollout: {
    rolloutId: string;
    taskId: string;
    model: string;
    seedKey: string;
    labels: Record<string, string>;
  },
): RolloutRequest {
  return {
    rolloutId: rollout.rolloutId,
    taskId: rollout.taskId,
    harness: config.harness,
    model: rollout.model,
    capture: false,
    guardMode: "block",
    rewardMode: "eval",
    temperature: config.temperature,
    seed: rolloutSeed(config.seed, rollout.seedKey),
    maxTurns: config.maxTurns,
    contextWindow: config.contextWindow,
    ...(config.agentTimeoutSec ? { agentTimeoutSec: config.agentTimeoutSec } : {}),
    labels: rollout.labels,
  };
}

/** The `progress` query of a job: rollouts done of all it runs. */
export const jobProgress = defineQuery<JobProgress>("progress");

/**
 * The `admitted` update of a job: answers once the job has checked what it was asked to run (the
 * models serving must know, the tasks it must judge on) with the number of rollouts it will run, or
 * fails with the reason it refused. The gateway starts a job with this update, so a request that
 * cannot run is refused in its HTTP answer instead of failing later as a workflow.
 */
export const admitted = defineUpdate<JobAdmission>("admitted");

/**
 * Runs a job's checks under the `admitted` update. A refusal fails the update with the checks'
 * own reason and type (`model_not_found`, `invalid_tasks`, ...) and then the job itself, once the
 * update has answered, so its history keeps why.
 */
export async function admit<T>(check: () => Promise<T>, rollouts: (checked: T) => number): Promise<T> {
  let verdict: JobAdmission | ApplicationFailure | undefined;
  setHandler(admitted, async () => {
    await condition(() => verdict !== undefined);
    if (verdict instanceof ApplicationFailure) throw verdict;
    return verdict!;
  });
  try {
    const checked = await check();
    verdict = { rollouts: rollouts(checked) };
    return checked;
  } catch (err) {
    const cause = err instanceof ActivityFailure ? err.cause : err;
    verdict =
      cause instanceof ApplicationFailure
        ? ApplicationFailure.nonRetryable(cause.message, cause.type)
        : ApplicationFailure.nonRetryable(String((cause as Error)?.message ?? cause), "admission_failed");
    await condition(allHandlersFinished);
    throw err;
  }
}
