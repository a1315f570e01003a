import { randomUUID } from "node:crypto";
import { jobView, SearchAttributes, TaskQueues } from "@bridle/contracts";
import { createRouter, errorContent, httpError, jsonContent } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import { type Client, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from "@temporalio/client";
import { defineSearchAttributeKey } from "@temporalio/common";
import { failureMessage, toStatus, workflowUiUrl } from "../temporal.ts";

const Id = z.object({ id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "an id") });
const kindKey = defineSearchAttributeKey(SearchAttributes.kind.name, "KEYWORD");
const harnessKey = defineSearchAttributeKey(SearchAttributes.harness.name, "KEYWORD");

/** A finite job run as one workflow: an evaluation or a calibration. */
export interface JobKind<C extends JobConfig> {
  /** Singular noun for messages, e.g. "evaluation". */
  noun: string;
  /** The workflow type the worker registers, and the id prefix (`<prefix>-<id>`). */
  workflowType: string;
  prefix: string;
  config: z.ZodType<C>;
  output: z.ZodType;
  summary: (config: C) => string;
}

interface JobConfig {
  id?: string | undefined;
  harness: string;
}

export interface JobDeps {
  temporal: Client;
  namespace: string;
  uiUrl: string;
}

/** POST / starts a job; GET /{id} reads it (with ?wait=true, once it has ended). */
export function jobRoutes<C extends JobConfig>(kind: JobKind<C>, deps: JobDeps) {
  const workflowId = (id: string) => `${kind.prefix}-${id}`;
  const ui = (id: string) => workflowUiUrl(deps.uiUrl, deps.namespace, id);
  // The route schemas are erased to plain objects here: the types are checked where a kind is made.
  const View = jobView(kind.output);
  const Config = kind.config as unknown as z.ZodObject;
  return createRouter()
    .openapi(
      createRoute({
        method: "post",
        path: "/",
        summary: `Start an ${kind.noun}`.replace(/^Start an ([^aeiou])/, "Start a $1"),
        request: { body: { content: { "application/json": { schema: Config } }, required: true } },
        responses: {
          202: jsonContent(View, "Started"),
          400: errorContent("Invalid configuration"),
          409: errorContent("Exists"),
        },
      }),
      async (c) => {
        const config = c.req.valid("json") as unknown as C;
        const id = config.id ?? `${kind.prefix}-${randomUUID().slice(0, 8)}`;
        const wf = workflowId(id);
        await deps.temporal.workflow
          .start(kind.workflowType, {
            taskQueue: TaskQueues.control,
            workflowId: wf,
            args: [{ ...config, id }],
            staticSummary: kind.summary(config),
            typedSearchAttributes: [
              { key: kindKey, value: kind.noun },
              { key: harnessKey, value: config.harness },
            ],
          })
          .catch((err: unknown) => {
            if (err instanceof WorkflowExecutionAlreadyStartedError)
              throw httpError(409, `${kind.prefix}_exists`, `${kind.noun} '${id}' exists`);
            throw httpError(503, "temporal_unavailable", `cannot start the ${kind.noun}: ${String(err)}`, {
              retryable: true,
            });
          });
        const view = { id, workflowId: wf, status: "RUNNING" as const, uiUrl: ui(wf), progress: null };
        return c.json({ ...view, output: null, failure: null }, 202);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/{id}",
        summary: `An ${kind.noun}'s status, and its output once done`,
        request: { params: Id, query: z.object({ wait: z.enum(["true", "false"]).default("false") }) },
        responses: { 200: jsonContent(View, kind.noun), 404: errorContent(`No such ${kind.noun}`) },
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
          if (status === "COMPLETED") output = kind.output.parse(await h.result());
          if (status === "FAILED") {
            failure = await h.result().then(
              () => null,
              (err: unknown) => failureMessage(err),
            );
          }
          return c.json(
            { id, workflowId: h.workflowId, status, uiUrl: ui(h.workflowId), progress, output, failure },
            200,
          );
        } catch (err) {
          if (err instanceof WorkflowNotFoundError)
            throw httpError(404, "not_found", `no ${kind.noun} '${id}'`);
          throw err;
        }
      },
    );
}
