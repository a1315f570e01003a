import { type JobProgress, TaskQueues } from "@bridle/contracts";
import { defineQuery, proxyActivities } from "@temporalio/workflow";
import type { Activities } from "../activities.ts";

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

/** The `progress` query of a job: rollouts done of all it runs. */
export const jobProgress = defineQuery<JobProgress>("progress");
