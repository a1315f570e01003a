import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { RunId, TrainStepRequest, TrainStepView } from "@bridle/contracts";
import {
  ATTEMPT_HEADER,
  attemptOf,
  createRouter,
  errorContent,
  httpError,
  jsonBody,
  jsonContent,
} from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { checkAgainstModel, type TrainingSteps } from "../steps.ts";
import type { TrainerWorker } from "../worker.ts";

/** Rejects bodies that are not JSON before validation, naming NaN/Infinity, which JSON cannot carry. */
const requireJson: MiddlewareHandler = async (c, next) => {
  if (c.req.method !== "POST") return next();
  const text = await c.req.text();
  try {
    JSON.parse(text);
  } catch (err) {
    const hint = /\b(NaN|-?Infinity)\b/.test(text)
      ? "; NaN and Infinity are not numbers in JSON, and logprobs must be finite"
      : "";
    throw httpError(
      400,
      "invalid_json",
      `The request body is not valid JSON (${(err as Error).message})${hint}`,
    );
  }
  return next();
};

/** The files of a PEFT adapter that serving needs. */
const ADAPTER_FILES = ["adapter_config.json", "adapter_model.safetensors"] as const;

export function stepRoutes(steps: TrainingSteps, worker: TrainerWorker) {
  const Params = z.object({ run: RunId, step: z.coerce.number().int().min(1) });
  const router = createRouter();
  router.use("/steps", requireJson);
  return router
    .openapi(
      createRoute({
        method: "post",
        path: "/steps",
        summary: "Run a GRPO step exactly once; a finished step returns its committed result",
        request: { body: jsonBody(TrainStepRequest) },
        responses: {
          200: jsonContent(TrainStepView, "The step had already completed: its committed result"),
          202: jsonContent(TrainStepView, "The step is running: poll GET /v1/steps/{run}/{step}"),
          400: errorContent("Invalid batch"),
          409: errorContent(
            "Conflict: another step is running, a different batch, or an earlier step is missing",
          ),
          503: errorContent("The worker is starting or restarting (retryable)"),
        },
      }),
      (c) => {
        const request = c.req.valid("json");
        checkAgainstModel(request.trajectories ?? [], worker);
        const view = steps.submit(request, attemptOf(c.req.header(ATTEMPT_HEADER), 0));
        return c.json(view, view.state === "done" ? 200 : 202);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/steps/{run}/{step}",
        summary: "A step's progress (for heartbeats), committed result, or failure",
        request: { params: Params },
        responses: { 200: jsonContent(TrainStepView, "The step"), 404: errorContent("Unknown step") },
      }),
      (c) => {
        const { run, step } = c.req.valid("param");
        const view = steps.view(run, step);
        if (!view)
          throw httpError(404, "step_not_found", `step ${step} of run ${run} was never submitted here`);
        return c.json(view, 200);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/steps/{run}/{step}/adapter/{file}",
        summary:
          "A committed step's adapter files: serving fetches them by reference and checks them against the step's adapterHash",
        request: { params: Params.extend({ file: z.enum(ADAPTER_FILES) }) },
        responses: {
          200: {
            description: "The file's bytes",
            content: { "application/octet-stream": { schema: z.string().openapi({ format: "binary" }) } },
          },
          404: errorContent("The step has not completed, or its adapter is gone"),
        },
      }),
      async (c) => {
        const { run, step, file } = c.req.valid("param");
        const result = steps.committed(run, step);
        if (!result)
          throw httpError(404, "step_not_found", `step ${step} of run ${run} has not completed here`);
        const bytes = await readFile(join(result.adapterPath, file)).catch(() => {
          throw httpError(404, "adapter_gone", `the adapter of step ${step} of run ${run} has no ${file}`);
        });
        return c.body(bytes, 200, { "content-type": "application/octet-stream" });
      },
    )
    .openapi(
      createRoute({
        method: "delete",
        path: "/steps/{run}/{step}",
        summary: "Cancel the step if it is running: the worker restarts, the step fails as step_cancelled",
        request: { params: Params },
        responses: {
          202: jsonContent(
            z.object({ run: RunId, step: z.number().int(), cancelled: z.literal(true) }),
            "Cancelled",
          ),
          404: errorContent("The step is not running"),
          409: errorContent("A later attempt of the caller's activity waits for this step"),
        },
      }),
      (c) => {
        const { run, step } = c.req.valid("param");
        // Without an attempt (a person cancelling by hand) the step is cancelled whoever waits.
        const outcome = steps.cancel(
          run,
          step,
          attemptOf(c.req.header(ATTEMPT_HEADER), Number.POSITIVE_INFINITY),
        );
        if (outcome === "not_running")
          throw httpError(404, "step_not_running", `step ${step} of run ${run} is not running`);
        if (outcome === "superseded")
          throw httpError(
            409,
            "superseded",
            `a later attempt waits for step ${step} of run ${run}; it goes on`,
          );
        return c.json({ run, step, cancelled: true as const }, 202);
      },
    );
}
