import { randomUUID } from "node:crypto";
import { JobAdmission, JobList, jobView, SearchAttributes, TaskQueues } from "@bridle/contracts";
import { createRouter, errorContent, httpError, jsonBody, jsonContent } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import {
  type Client,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateStage,
} from "@temporalio/client";
import { ApplicationFailure } from "@temporalio/common";
import { failureMessage, listWorkflows, toStatus, workflowUiUrl } from "../temporal.ts";

const Id = z.object({ id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "an id") });

/**
 * How long a start waits for the job to check what it was asked to run. Its checks are two or three
 * short activities; a worker that is down or buried in load does not hold the request longer: the
 * job is then answered as started (admission null) and refuses itself as soon as a worker takes it.
 */
const ADMISSION_WAIT_MS = 30_000;

/** The HTTP status of each reason a job refuses to run. */
const refusalStatus: Record<string, 400 | 404 | 409> = {
  model_not_found: 404,
  model_not_served: 409,
  invalid_tasks: 400,
  no_tasks: 400,
};

/** A finite job run as one workflow: an evaluation or a calibration. */
export interface JobKind<CS extends z.ZodType<JobConfig>, OS extends z.ZodType> {
  /** Singular noun for messages, e.g. "evaluation". */
  noun: string;
  /** The workflow type the worker registers, and the id prefix (`<prefix>-<id>`). */
  workflowType: string;
  prefix: string;
  config: CS;
  output: OS;
  summary: (config: z.infer<CS>) => string;
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

/**
 * What the job handlers use of Hono's context. The handlers are generic over the job's schemas,
 * which Hono's handler types cannot follow; the routes' types, instantiated per kind, still reach
 * the gateway's typed client.
 */
interface JobContext {
  req: { valid(target: "json" | "param" | "query"): unknown };
  json(body: unknown, status: 200 | 202): Response;
}

/** POST / starts a job; GET /{id} reads it (with ?wait=true, once it has ended). */
export function jobRoutes<CS extends z.ZodType<JobConfig>, OS extends z.ZodType>(
  kind: JobKind<CS, OS>,
  deps: JobDeps,
) {
  const workflowId = (id: string) => `${kind.prefix}-${id}`;
  const ui = (id: string) => workflowUiUrl(deps.uiUrl, deps.namespace, id);
  const View = jobView(kind.output);
  return createRouter()
    .openapi(
      createRoute({
        method: "post",
        path: "/",
        summary: `Start an ${kind.noun}`.replace(/^Start an ([^aeiou])/, "Start a $1"),
        request: { body: jsonBody(kind.config) },
        responses: {
          202: jsonContent(
            View.extend({
              /** What the job checked it will run; null when no worker answered in time. */
              admission: JobAdmission.nullable(),
            }),
            "Started",
          ),
          400: errorContent("Invalid configuration, or tasks the job cannot run on"),
          404: errorContent("A model serving does not know"),
          409: errorContent("Exists, or a model serving no longer answers for"),
        },
      }),
      (async (c: JobContext) => {
        const config = c.req.valid("json") as z.infer<CS>;
        const id = config.id ?? `${kind.prefix}-${randomUUID().slice(0, 8)}`;
        const wf = workflowId(id);
        const admission = await admitted(kind, config, id, wf, deps).catch((err: unknown) => {
          if (err instanceof WorkflowExecutionAlreadyStartedError)
            throw httpError(409, `${kind.prefix}_exists`, `${kind.noun} '${id}' exists`);
          if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) {
            const type = err.cause.type ?? "refused";
            throw httpError(refusalStatus[type] ?? 400, type, `${kind.noun} refused: ${err.cause.message}`);
          }
          throw httpError(503, "temporal_unavailable", `cannot start the ${kind.noun}: ${String(err)}`, {
            retryable: true,
          });
        });
        const view = { id, workflowId: wf, status: "RUNNING" as const, uiUrl: ui(wf), progress: null };
        return c.json({ ...view, output: null, failure: null, admission }, 202);
      }) as never,
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/",
        summary: `${kind.noun[0]!.toUpperCase()}${kind.noun.slice(1)}s, newest first (the latest 200)`,
        responses: { 200: jsonContent(JobList, `${kind.noun}s`) },
      }),
      async (c) => {
        const listed = await listWorkflows(deps.temporal, kind.workflowType, ui);
        const jobs = listed.map((w) => ({ id: w.workflowId.slice(kind.prefix.length + 1), ...w }));
        return c.json({ jobs }, 200);
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
      (async (c: JobContext) => {
        const { id } = c.req.valid("param") as z.infer<typeof Id>;
        const h = deps.temporal.workflow.getHandle(workflowId(id));
        try {
          if ((c.req.valid("query") as { wait: string }).wait === "true")
            await h.result().catch(() => undefined);
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
      }) as never,
    );
}

/**
 * Starts a job with its `admitted` update and waits a bounded time for the answer: the job's own
 * checks (models, tasks) refuse it before its first rollout, and the refusal becomes the HTTP
 * answer. Null when no worker answered within ADMISSION_WAIT_MS: the job is started all the same.
 */
async function admitted<CS extends z.ZodType<JobConfig>, OS extends z.ZodType>(
  kind: JobKind<CS, OS>,
  config: z.infer<CS>,
  id: string,
  workflowId: string,
  deps: JobDeps,
): Promise<JobAdmission | null> {
  const start = new WithStartWorkflowOperation(kind.workflowType, {
    taskQueue: TaskQueues.control,
    workflowId,
    workflowIdConflictPolicy: "FAIL",
    args: [{ ...config, id }],
    staticSummary: kind.summary(config),
    typedSearchAttributes: [
      { key: SearchAttributes.kind, value: kind.noun },
      { key: SearchAttributes.harness, value: config.harness },
    ],
  });
  const deadline = Date.now() + ADMISSION_WAIT_MS;
  try {
    const update = await deps.temporal.connection.withDeadline(deadline, () =>
      deps.temporal.workflow.startUpdateWithStart<() => Promise<unknown>, JobAdmission, []>("admitted", {
        startWorkflowOperation: start,
        waitForStage: WorkflowUpdateStage.ACCEPTED,
      }),
    );
    return JobAdmission.parse(await deps.temporal.connection.withDeadline(deadline, () => update.result()));
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError || err instanceof WorkflowExecutionAlreadyStartedError)
      throw err;
    // Past the deadline the job may well be started: it is if Temporal has it.
    const started = await deps.temporal.workflow
      .getHandle(workflowId)
      .describe()
      .then(() => true)
      .catch(() => false);
    if (started) return null;
    throw err;
  }
}
