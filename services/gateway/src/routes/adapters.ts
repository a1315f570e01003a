import { randomUUID } from "node:crypto";
import {
  AdapterList,
  LineageDecision,
  LineageList,
  LineageView,
  SearchAttributes,
  TaskQueues,
  versionOf,
} from "@bridle/contracts";
import { callJson, createRouter, errorContent, httpError, jsonBody, jsonContent } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import { type Client, WorkflowFailedError } from "@temporalio/client";
import { ApplicationFailure } from "@temporalio/common";
import { workflowUiUrl } from "../temporal.ts";

interface Deps {
  servingUrl: string;
  temporal: Client;
  namespace: string;
  uiUrl: string;
}

/** Reads serving's registry; no answer is a retryable 503. */
export function readServing<T>(servingUrl: string, path: string, schema: z.ZodType<T>): Promise<T> {
  return callJson(`${servingUrl}${path}`, { schema }).catch((err: unknown) => {
    throw httpError(
      503,
      "serving_unavailable",
      `the serving service is unavailable: ${(err as Error).message}`,
      {
        retryable: true,
      },
    );
  });
}

/** What `GET /v1/adapters` answers: every adapter and its versions, and every lineage. */
export const AdapterOverview = AdapterList.extend({
  lineages: z
    .array(
      LineageView.extend({
        decisions: z.array(
          LineageDecision.extend({
            uiUrl: z.string().describe("The decision's workflow in the Temporal UI"),
          }),
        ),
      }),
    )
    .describe(
      "Per (model, harness): the promoted version, each decision with the evaluation behind it, the adapters",
    ),
});

/**
 * Adapter versions and lineages, read from the serving service's registry. Read-only here: every
 * change to adapters goes through a workflow (a training run's loads, promotion and rollback).
 */
export function adapterRoutes(deps: Deps) {
  return createRouter().openapi(
    createRoute({
      method: "get",
      path: "/",
      summary:
        "Every adapter and its versions (state, hash, step, parent), and every lineage with its decisions",
      responses: {
        200: jsonContent(AdapterOverview, "Adapters and lineages"),
        503: errorContent("Serving unavailable"),
      },
    }),
    async (c) => {
      const [list, lineages] = await Promise.all([
        readServing(deps.servingUrl, "/v1/adapters", AdapterList),
        readServing(deps.servingUrl, "/v1/lineages", LineageList),
      ]);
      // Each decision is a workflow (its id is the decision's): linked for the dashboard.
      const linked = lineages.lineages.map((l) => ({
        ...l,
        decisions: l.decisions.map((d) => ({ ...d, uiUrl: workflowUiUrl(deps.uiUrl, deps.namespace, d.id) })),
      }));
      return c.json({ ...list, lineages: linked }, 200);
    },
  );
}

const part = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/);
const KeyParams = z.object({ model: part, harness: part });
const Reason = z.string().min(1).max(2_000).describe("Why, in words: kept with the decision");
const PromoteRequest = z
  .object({
    adapter: z
      .string()
      .regex(/^[^@]+@v\d+$/, "a versioned served name: <model>/<harness>/<run>@v<N>")
      .describe("The version to promote"),
    reason: Reason,
  })
  .strict();
const RollbackRequest = z.object({ reason: Reason }).strict();
const DecisionAnswer = z.object({ workflowId: z.string(), uiUrl: z.string(), decision: LineageDecision });

/** What serving's refusal codes mean to a caller of the gateway. */
const STATUS_OF: Record<string, 400 | 404 | 409> = {
  wrong_lineage: 400,
  adapter_not_found: 404,
  adapter_not_serving: 409,
  already_promoted: 409,
  not_promoted: 409,
};

/**
 * Lineages: `GET` reads them; promoting a version or rolling the promoted one back by hand starts
 * the same Temporal workflow an evaluation's verdict starts, and answers with its decision.
 */
export function lineageRoutes(deps: Deps) {
  const decideBy = async (
    kind: "promotion" | "rollback",
    key: { model: string; harness: string },
    adapter: { name: string; version: number },
    reason: string,
  ) => {
    const workflowId = `${kind === "promotion" ? "promote" : "rollback"}-by-hand-${key.model}-${key.harness}-${randomUUID().slice(0, 8)}`;
    try {
      const decision = await deps.temporal.workflow.execute(kind, {
        taskQueue: TaskQueues.control,
        workflowId,
        args: [{ key, adapter, reason, evalId: null }],
        staticSummary: `${kind === "promotion" ? "Promote" : "Roll back"} ${adapter.name}@v${adapter.version} by hand`,
        typedSearchAttributes: [{ key: SearchAttributes.kind, value: kind }],
        workflowExecutionTimeout: "5 minutes",
      });
      return { workflowId, uiUrl: workflowUiUrl(deps.uiUrl, deps.namespace, workflowId), decision };
    } catch (err) {
      let cause: unknown = err;
      while (cause instanceof Error && !(cause instanceof ApplicationFailure) && cause.cause)
        cause = cause.cause;
      if (err instanceof WorkflowFailedError && cause instanceof ApplicationFailure && cause.type) {
        throw httpError(STATUS_OF[cause.type] ?? 409, cause.type, cause.message);
      }
      throw httpError(503, "temporal_unavailable", `cannot decide: ${(err as Error).message}`, {
        retryable: true,
      });
    }
  };
  return createRouter()
    .openapi(
      createRoute({
        method: "get",
        path: "/",
        summary: "Every lineage: promoted version, decisions (with the evaluations behind them), adapters",
        responses: { 200: jsonContent(LineageList, "Lineages"), 503: errorContent("Serving unavailable") },
      }),
      async (c) => c.json(await readServing(deps.servingUrl, "/v1/lineages", LineageList), 200),
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/{model}/{harness}",
        summary: "One lineage",
        request: { params: KeyParams },
        responses: { 200: jsonContent(LineageView, "Lineage"), 503: errorContent("Serving unavailable") },
      }),
      async (c) => {
        const { model, harness } = c.req.valid("param");
        return c.json(
          await readServing(deps.servingUrl, `/v1/lineages/${model}/${harness}`, LineageView),
          200,
        );
      },
    )
    .openapi(
      createRoute({
        method: "post",
        path: "/{model}/{harness}/promotions",
        summary:
          "Promote a serving version by hand (a promotion workflow, as an evaluation's verdict starts)",
        request: {
          params: KeyParams,
          body: jsonBody(PromoteRequest),
        },
        responses: {
          200: jsonContent(DecisionAnswer, "Promoted"),
          400: errorContent("Invalid request, or a version of another lineage"),
          404: errorContent("Unknown version"),
          409: errorContent("Not serving, or already promoted"),
        },
      }),
      async (c) => {
        const key = c.req.valid("param");
        const { adapter, reason } = c.req.valid("json");
        return c.json(await decideBy("promotion", key, versionOf(adapter)!, reason), 200);
      },
    )
    .openapi(
      createRoute({
        method: "post",
        path: "/{model}/{harness}/rollbacks",
        summary: "Roll the promoted version back by hand, to what was promoted before it (or the base model)",
        request: {
          params: KeyParams,
          body: jsonBody(RollbackRequest),
        },
        responses: {
          200: jsonContent(DecisionAnswer, "Rolled back"),
          409: errorContent("Nothing is promoted"),
        },
      }),
      async (c) => {
        const key = c.req.valid("param");
        const { promoted } = await readServing(
          deps.servingUrl,
          `/v1/lineages/${key.model}/${key.harness}`,
          LineageView,
        );
        if (!promoted)
          throw httpError(
            409,
            "nothing_promoted",
            `no version of ${key.model} in ${key.harness} is promoted`,
          );
        const adapter = { name: promoted.name, version: promoted.version };
        return c.json(await decideBy("rollback", key, adapter, c.req.valid("json").reason), 200);
      },
    );
}
