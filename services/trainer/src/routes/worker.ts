import { TrainerWorkerInfo } from "@bridle/contracts";
import { createRouter, jsonContent } from "@bridle/service-kit";
import { createRoute } from "@hono/zod-openapi";
import type { TrainerWorker } from "../worker.ts";

export function workerRoutes(worker: TrainerWorker) {
  return createRouter().openapi(
    createRoute({
      method: "get",
      path: "/worker",
      summary: "The resident trainer worker: state, process id, device, restarts",
      responses: {
        200: jsonContent(TrainerWorkerInfo, "Worker"),
      },
    }),
    (c) => {
      const { maxTokens: _, ...info } = worker.info;
      return c.json(info, 200);
    },
  );
}
