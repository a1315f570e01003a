import {
  adapterName,
  LineageView,
  RunList,
  RunMetricsList,
  RunProgress,
  RunView,
  runWorkflowId,
  SearchAttributes,
  TaskQueues,
  TrainingRunConfig,
} from "@bridle/contracts";
import {
  callJson,
  createRouter,
  errorContent,
  httpError,
  jsonBody,
  jsonContent,
  type Logger,
} from "@bridle/service-kit";
import type { trainingRun } from "@bridle/workflows";
import { createRoute, z } from "@hono/zod-openapi";
import { type Client, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from "@temporalio/client";
import { streamSSE } from "hono/streaming";
import { failureMessage, listWorkflows, toStatus, workflowUiUrl } from "../temporal.ts";
import { readServing } from "./adapters.ts";

export interface RunDeps {
  temporal: Client;
  namespace: string;
  uiUrl: string;
  log: Logger;
  /** The trainer keeps every step's figures of every run (the workflow carries its latest). */
  trainerUrl: string;
  /** Serving's lineages: a run that continues one needs a promoted version to start from. */
  servingUrl: string;
}

/** How long a run's view waits for its workflow to answer the progress query. */
const PROGRESS_QUERY_TIMEOUT_MS = 10_000;

const Name = z.object({ name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "a run name") });

/** Training runs: start, list, read, pause, resume, cancel, metrics and a live event stream. */
export function runRoutes(deps: RunDeps) {
  const ui = (id: string) => workflowUiUrl(deps.uiUrl, deps.namespace, id);
  const handle = (name: string) => deps.temporal.workflow.getHandle(runWorkflowId(name));

  async function view(name: string): Promise<RunView> {
    const h = handle(name);
    try {
      const description = await h.describe();
      const status = toStatus(description.status.name);
      const progress =
        status === "RUNNING"
          ? await liveProgress(h)
          : status === "COMPLETED"
            ? RunProgress.parse(await h.result())
            : null;
      const failure =
        status === "FAILED"
          ? await h.result().then(
              () => null,
              (err: unknown) => failureMessage(err),
            )
          : null;
      return { name, workflowId: h.workflowId, status, uiUrl: ui(h.workflowId), progress, failure };
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw httpError(404, "not_found", `no run named '${name}'`);
      throw err;
    }
  }

  /**
   * A running run's progress, asked of its workflow. A query is answered by a worker, and a worker
   * sharing two busy cores with the model server and the trainer can take a while, or be gone
   * while the supervisor restarts it: the view waits a bounded time and then answers without
   * progress (null), whatever the query failed with (its deadline, the server's own query timeout,
   * a worker that went away), so a caller never hangs on it and never gets a 500 for it. The run's
   * status comes from Temporal's own record and stays exact.
   */
  async function liveProgress(h: ReturnType<typeof handle>): Promise<RunProgress | null> {
    try {
      return await deps.temporal.connection.withDeadline(Date.now() + PROGRESS_QUERY_TIMEOUT_MS, () =>
        h.query<RunProgress>("progress"),
      );
    } catch (err) {
      deps.log.warn(
        { workflowId: h.workflowId, timeoutMs: PROGRESS_QUERY_TIMEOUT_MS, err },
        "progress query unanswered: the view has no progress",
      );
      return null;
    }
  }

  const signal = (name: "pause" | "resume" | "cancel") =>
    createRoute({
      method: "post",
      path: `/{name}/${name}`,
      summary: `${name[0]!.toUpperCase()}${name.slice(1)} a run`,
      request: { params: Name },
      responses: {
        202: jsonContent(RunView, "Signalled"),
        404: errorContent("No such run"),
        409: errorContent("The run is not running"),
      },
    });
  const signalHandler =
    (name: "pause" | "resume" | "cancel") => async (c: { req: { valid(t: "param"): { name: string } } }) => {
      const run = c.req.valid("param").name;
      const current = await view(run);
      if (current.status !== "RUNNING")
        throw httpError(409, "not_running", `run '${run}' is ${current.status}`);
      await handle(run).signal(name);
      return view(run);
    };

  return createRouter()
    .openapi(
      createRoute({
        method: "post",
        path: "/",
        summary: "Start a training run",
        request: { body: jsonBody(TrainingRunConfig) },
        responses: {
          202: jsonContent(RunView, "Started"),
          400: errorContent("Invalid configuration"),
          409: errorContent(
            "A run with this name exists, or it would continue a lineage with nothing promoted",
          ),
          503: errorContent("Temporal unavailable"),
        },
      }),
      async (c) => {
        const config = c.req.valid("json");
        const id = runWorkflowId(config.name);
        // Refused here, in the answer, rather than as a run that fails at once.
        if (config.start === "promoted") {
          const path = `/v1/lineages/${config.baseModel}/${config.harness}`;
          const lineage = await readServing(deps.servingUrl, path, LineageView);
          if (!lineage.promoted)
            throw httpError(
              409,
              "nothing_promoted",
              `no adapter of ${config.baseModel} in ${config.harness} is promoted: start fresh, or promote a version first`,
            );
          if (lineage.promoted.state !== "serving")
            throw httpError(
              409,
              "promoted_not_serving",
              `the promoted ${lineage.promoted.servedName} is ${lineage.promoted.state}: roll it back first`,
            );
        }
        await deps.temporal.workflow
          .start<typeof trainingRun>("trainingRun", {
            taskQueue: TaskQueues.control,
            workflowId: id,
            args: [{ config }],
            staticSummary: `Train ${config.baseModel} for ${config.harness}: ${config.steps} steps of ${config.batchSize} task(s) x ${config.groupSize} rollouts`,
            staticDetails: `Run ${config.name}; adapter ${adapterName({ model: config.baseModel, harness: config.harness, run: config.name })}`,
            typedSearchAttributes: [
              { key: SearchAttributes.run, value: config.name },
              { key: SearchAttributes.kind, value: "training" },
              { key: SearchAttributes.harness, value: config.harness },
              { key: SearchAttributes.model, value: config.baseModel },
              { key: SearchAttributes.step, value: 0 },
            ],
          })
          .catch((err: unknown) => {
            if (err instanceof WorkflowExecutionAlreadyStartedError) {
              throw httpError(409, "run_exists", `a run named '${config.name}' exists; pick another name`);
            }
            throw httpError(503, "temporal_unavailable", `cannot start the run: ${String(err)}`, {
              retryable: true,
            });
          });
        c.get("log").info({ run: config.name, workflowId: id }, "run started");
        return c.json(
          {
            name: config.name,
            workflowId: id,
            status: "RUNNING" as const,
            uiUrl: ui(id),
            progress: null,
            failure: null,
          },
          202,
        );
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/",
        summary: "Training runs, newest first",
        responses: {
          200: jsonContent(RunList, "Runs"),
        },
      }),
      async (c) => {
        const listed = await listWorkflows(deps.temporal, "trainingRun", ui);
        const runs = listed.map((w) => ({ name: w.workflowId.replace(/^run-/, ""), ...w }));
        return c.json({ runs }, 200);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/{name}",
        summary: "A run's status and progress",
        request: { params: Name },
        responses: { 200: jsonContent(RunView, "Run"), 404: errorContent("No such run") },
      }),
      async (c) => c.json(await view(c.req.valid("param").name), 200),
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/{name}/metrics",
        summary: "Per-step figures of a run, every step (the trainer keeps them all)",
        request: { params: Name },
        responses: {
          200: jsonContent(
            z.object({
              name: z.string(),
              metrics: RunProgress.shape.metrics,
              complete: z
                .boolean()
                .describe("Every step is here; false when only the workflow's latest steps could be read"),
              run: RunView.describe(
                "The run's view these figures were read with (one progress query for both)",
              ),
            }),
            "Metrics",
          ),
          404: errorContent("No such run"),
        },
      }),
      async (c) => {
        const run = await view(c.req.valid("param").name);
        const latest = run.progress?.metrics ?? [];
        const kept = await callJson(`${deps.trainerUrl}/v1/runs/${encodeURIComponent(run.name)}/metrics`, {
          schema: RunMetricsList,
          timeoutMs: 10_000,
        }).catch((err: unknown) => {
          deps.log.warn({ err, run: run.name }, "the trainer's record of the run is unavailable");
          return { metrics: [] };
        });
        // The trainer's record, with the workflow's latest steps over it (one it has not recorded yet).
        const byStep = new Map([...kept.metrics, ...latest].map((m) => [m.step, m]));
        const metrics = [...byStep.values()].sort((a, b) => a.step - b.step);
        const steps = run.progress?.step ?? metrics.length;
        return c.json({ name: run.name, metrics, complete: metrics.length >= steps, run }, 200);
      },
    )
    .openapi(signal("pause"), async (c) => c.json(await signalHandler("pause")(c), 202))
    .openapi(signal("resume"), async (c) => c.json(await signalHandler("resume")(c), 202))
    .openapi(signal("cancel"), async (c) => c.json(await signalHandler("cancel")(c), 202))
    .get("/:name/events", async (c) => {
      const name = c.req.param("name");
      await view(name); // 404 before the stream opens
      return streamSSE(c, async (stream) => {
        let last = "";
        let id = 0;
        while (!stream.aborted) {
          const current = await view(name).catch(() => undefined);
          if (current) {
            const text = JSON.stringify(current);
            if (text !== last) {
              last = text;
              await stream.writeSSE({ event: "progress", data: text, id: String(id++) });
            }
            if (current.status !== "RUNNING") {
              await stream.writeSSE({ event: "end", data: JSON.stringify({ status: current.status }) });
              return;
            }
          }
          await stream.sleep(1_000);
        }
      });
    });
}
