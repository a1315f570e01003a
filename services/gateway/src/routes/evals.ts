import { randomUUID } from "node:crypto";
import { EvalConfig, EvalOutput, SearchAttributes, TaskQueues, WorkflowStatus } from "@bridle/contracts";
import { createRouter, errorContent, httpError, jsonContent } from "@bridle/service-kit";
import type { evaluation } from "@bridle/workflows";
import { createRoute, z } from "@hono/zod-openapi";
import {
  type Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
} from "@temporalio/client";
import { defineSearchAttributeKey } from "@temporalio/common";
import { toStatus, workflowUiUrl } from "../temporal.ts";

const Id = z.object({ id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "an evaluation id") });

export const EvalView = z.object({
  id: z.string(),
  workflowId: z.string(),
  status: WorkflowStatus,
  uiUrl: z.string(),
  progress: z.object({ done: z.number().int(), total: z.number().int() }).nullable(),
  output: EvalOutput.nullable(),
  failure: z.string().nullable(),
});

const kind = defineSearchAttributeKey(SearchAttributes.kind.name, "KEYWORD");
const harness = defineSearchAttributeKey(SearchAttributes.harness.name, "KEYWORD");

/** Evaluations: adapter vs base (or two versions) on held-out tasks, started over HTTP. */
export function evalRoutes(deps: { temporal: Client; namespace: string; uiUrl: string }) {
  const workflowId = (id: string) => `eval-${id}`;
  const ui = (id: string) => workflowUiUrl(deps.uiUrl, deps.namespace, id);
  return createRouter()
    .openapi(
      createRoute({
        method: "post",
        path: "/",
        summary: "Start an evaluation",
        request: { body: { content: { "application/json": { schema: EvalConfig } }, required: true } },
        responses: {
          202: jsonContent(EvalView, "Started"),
          400: errorContent("Invalid configuration"),
          409: errorContent("Exists"),
        },
      }),
      async (c) => {
        const config = c.req.valid("json");
        const id = config.id ?? `eval-${randomUUID().slice(0, 8)}`;
        await deps.temporal.workflow
          .start<typeof evaluation>("evaluation", {
            taskQueue: TaskQueues.control,
            workflowId: workflowId(id),
            args: [{ ...config, id }],
            staticSummary: `Evaluate ${config.candidate} vs ${config.baseline} with ${config.harness}, ${config.attempts} attempt(s) per task`,
            typedSearchAttributes: [
              { key: kind, value: "evaluation" },
              { key: harness, value: config.harness },
            ],
          })
          .catch((err: unknown) => {
            if (err instanceof WorkflowExecutionAlreadyStartedError)
              throw httpError(409, "eval_exists", `evaluation '${id}' exists`);
            throw httpError(503, "temporal_unavailable", `cannot start the evaluation: ${String(err)}`, {
              retryable: true,
            });
          });
        const wf = workflowId(id);
        return c.json(
          {
            id,
            workflowId: wf,
            status: "RUNNING" as const,
            uiUrl: ui(wf),
            progress: null,
            output: null,
            failure: null,
          },
          202,
        );
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/{id}",
        summary: "An evaluation's status, and its report once done",
        request: { params: Id, query: z.object({ wait: z.enum(["true", "false"]).default("false") }) },
        responses: { 200: jsonContent(EvalView, "Evaluation"), 404: errorContent("No such evaluation") },
      }),
      async (c) => {
        const { id } = c.req.valid("param");
        const h = deps.temporal.workflow.getHandle(workflowId(id));
        try {
          if (c.req.valid("query").wait === "true") await h.result().catch(() => undefined);
          const status = toStatus((await h.describe()).status.name);
          let output = null;
          let failure = null;
          let progress = null;
          if (status === "RUNNING")
            progress = await h.query<{ done: number; total: number }>("progress").catch(() => null);
          if (status === "COMPLETED") output = EvalOutput.parse(await h.result());
          if (status === "FAILED") {
            failure = await h.result().then(
              () => null,
              (err: unknown) =>
                err instanceof WorkflowFailedError ? String(err.cause?.message ?? err.message) : String(err),
            );
          }
          return c.json(
            { id, workflowId: h.workflowId, status, uiUrl: ui(h.workflowId), progress, output, failure },
            200,
          );
        } catch (err) {
          if (err instanceof WorkflowNotFoundError)
            throw httpError(404, "not_found", `no evaluation '${id}'`);
          throw err;
        }
      },
    );
}
