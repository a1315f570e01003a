import { fileURLToPath } from "node:url";
import { TaskQueues } from "@bridle/contracts";
import { createLogger, orExit } from "@bridle/service-kit";
import { NativeConnection, Worker } from "@temporalio/worker";
import { createActivities } from "./activities.ts";
import { loadWorkerEnv } from "./env.ts";

const env = orExit(loadWorkerEnv);
const log = createLogger("worker", env.LOG_LEVEL);
const workflowsPath = fileURLToPath(new URL("./workflows.ts", import.meta.url));

const connection = await NativeConnection.connect({ address: env.TEMPORAL_ADDRESS });
const activities = createActivities({ servingUrl: env.SERVING_URL });
const worker = await Worker.create({
  connection,
  namespace: env.TEMPORAL_NAMESPACE,
  taskQueue: TaskQueues.control,
  workflowsPath,
  activities,
});
log.info({ taskQueue: TaskQueues.control, namespace: env.TEMPORAL_NAMESPACE }, "worker started");
await worker.run();
await connection.close();
log.info("worker stopped");
