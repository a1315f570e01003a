import { fileURLToPath } from "node:url";
import { TaskQueues } from "@bridle/contracts";
import { createLogger, orExit, temporalConnection } from "@bridle/service-kit";
import { NativeConnection, Worker } from "@temporalio/worker";
import { createActivities, HEARTBEAT_THROTTLE_MAX } from "./activities.ts";
import { loadWorkerEnv } from "./env.ts";

const env = orExit(loadWorkerEnv);
const log = createLogger("worker", env.LOG_LEVEL);
const workflowsPath = fileURLToPath(new URL("./workflows/index.ts", import.meta.url));

const connection = await NativeConnection.connect(orExit(() => temporalConnection(env)));
const activities = createActivities({
  servingUrl: env.SERVING_URL,
  tasksUrl: env.TASKS_URL,
  guardUrl: env.GUARD_URL,
  guardAdminToken: env.GUARD_ADMIN_TOKEN,
  runnerUrl: env.RUNNER_URL,
  trainerUrl: env.TRAINER_URL,
  dataDir: env.WORKER_DATA_DIR,
});
const base = {
  connection,
  namespace: env.TEMPORAL_NAMESPACE,
  activities,
  maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE_MAX,
};
// One worker per queue: workflows and cheap activities on control; rollouts, training steps and
// adapter loads each on their own queue, so GPU nodes can serve only the GPU queues.
const workers = await Promise.all(
  env.WORKER_QUEUES.map((queue) =>
    Worker.create({
      ...base,
      taskQueue: TaskQueues[queue],
      ...(queue === "control" ? { workflowsPath } : {}),
      ...(queue === "rollout" ? { maxConcurrentActivityTaskExecutions: env.ROLLOUT_SLOTS } : {}),
      ...(queue === "training" || queue === "serving" ? { maxConcurrentActivityTaskExecutions: 1 } : {}),
    }),
  ),
);
log.info({ queues: env.WORKER_QUEUES, namespace: env.TEMPORAL_NAMESPACE }, "worker started");
await Promise.all(workers.map((w) => w.run()));
await connection.close();
log.info("worker stopped");
