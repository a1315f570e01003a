import { RunId, RunMetricsList, StepMetrics } from "@bridle/contracts";
import { createRouter, errorContent, httpError, jsonBody, jsonContent } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import type { RunMetrics } from "../metrics.ts";

/** Each run's per-step figures, recorded by its workflow after every step, read by the gateway. */
export function metricsRoutes(metrics: RunMetrics) {
  return createRouter()
    .openapi(
      createRoute({
        method: "put",
        path: "/runs/{run}/metrics/{step}",
        summary: "Record (or replace) one step's figures of a run",
        request: {
          params: z.object({ run: RunId, step: z.coerce.number().int().min(1) }),
          body: jsonBody(StepMetrics),
        },
        responses: { 204: { description: "Recorded" }, 400: errorContent("Invalid figures") },
      }),
      async (c) => {
        const { run, step } = c.req.valid("param");
        const body = c.req.valid("json");
        if (body.step !== step)
          throw httpError(400, "step_mismatch", `the figures are of step ${body.step}, not ${step}`);
        await metrics.record(run, body);
        return c.body(null, 204);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/runs/{run}/metrics",
        summary: "A run's figures, every step in order (none for a run that recorded none)",
        request: { params: z.object({ run: RunId }) },
        responses: { 200: jsonContent(RunMetricsList, "The run's steps") },
      }),
      async (c) => {
        const { run } = c.req.valid("param");
        return c.json({ run, metrics: await metrics.all(run) }, 200);
      },
    );
}
