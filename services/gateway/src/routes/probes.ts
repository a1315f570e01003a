import { randomUUID } from "node:crypto";
import { ProbeRequest, ProbeResult, ProbeStarted, ProbeView, TaskQueues } from "@bridle/contracts";
import { createRouter, errorContent, httpError, jsonBody, jsonContent } from "@bridle/service-kit";
import type { probeStack } from "@bridle/workflows";
import { createRoute, z } from "@hono/zod-openapi";
import { type Client, WorkflowFailedError, WorkflowNotFoundError } from "@temporalio/client";
import { failureMessage, toStatus, workflowUiUrl } from "../temporal.ts";

export interface ProbeDeps {
  temporal: Client;
  namespace: string;
  uiUrl: string;
}

const ProbeId = z.object({
  id: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[A-Za-z0-9._:-]+$/, "letters, digits, . _ : - only"),
});

/** Stack probes: the walking skeleton, started as a Temporal workflow. */
export function probeRoutes(deps: ProbeDeps) {
  const ui = (id: string) => workflowUiUrl(deps.uiUrl, deps.namespace, id);
  return createRouter()
    .openapi(
      createRoute({
        method: "post",
        path: "/",
        summary: "Start a stack probe workflow",
        request: { body: jsonBody(ProbeRequest, false) },
        responses: {
          202: jsonContent(ProbeStarted, "Started"),
          400: errorContent("Invalid request"),
          503: errorContent("Temporal unavailable"),
        },
      }),
      async (c) => {
        const input = ProbeRequest.parse(c.req.valid("json") ?? {});
        const id = `probe-${randomUUID()}`;
        const handle = await deps.temporal.workflow
          .start<typeof probeStack>("probeStack", {
            taskQueue: TaskQueues.control,
            workflowId: id,
            args: [input],
            staticSummary: `Stack probe: one ${input.maxTokens}-token completion through gateway, worker and serving`,
            staticDetails: `Prompt: ${input.prompt}`,
          })
          .catch((err: unknown) => {
            throw httpError(503, "temporal_unavailable", `cannot start the workflow: ${String(err)}`, {
              retryable: true,
            });
          });
        c.get("log").info({ workflowId: id }, "probe started");
        return c.json({ id, runId: handle.firstExecutionRunId, uiUrl: ui(id) }, 202);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/{id}",
        summary: "A stack probe's status and result",
        request: {
          params: ProbeId,
          query: z.object({
            wait: z.enum(["true", "false"]).default("false").describe("Wait for the result"),
          }),
        },
        responses: {
          200: jsonContent(ProbeView, "Probe"),
          400: errorContent("Invalid request"),
          404: errorContent("No such probe"),
        },
      }),
      async (c) => {
        const { id } = c.req.valid("param");
        const { wait } = c.req.valid("query");
        const handle = deps.temporal.workflow.getHandle(id);
        try {
          if (wait === "true")
            await handle.result().catch((err: unknown) => {
              if (!(err instanceof WorkflowFailedError)) throw err;
            });
          const description = await handle.describe();
          const status = toStatus(description.status.name);
          const view: ProbeView = { id, status, uiUrl: ui(id) };
          if (status === "COMPLETED") view.result = ProbeResult.parse(await handle.result());
          if (status === "FAILED") {
            view.failure = await handle.result().then(
              () => "unknown",
              (err: unknown) => failureMessage(err),
            );
          }
          return c.json(view, 200);
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) throw httpError(404, "not_found", `no probe ${id}`);
          throw err;
        }
      },
    );
}
