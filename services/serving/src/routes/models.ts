import {
  type AdapterStamp,
  BaseModelInfo,
  CompletionRequest,
  CompletionResult,
  ModelNodes,
  ScoreRequest,
  ScoreResult,
} from "@bridle/contracts";
import {
  createRouter,
  errorContent,
  httpError,
  jsonBody,
  jsonContent,
  ServiceError,
} from "@bridle/service-kit";
import { createRoute } from "@hono/zod-openapi";
import type { AdapterManager } from "../adapters.ts";
import type { ModelPool } from "../pool.ts";
import type { VllmClient } from "../vllm.ts";

const errors = {
  400: errorContent("Invalid request"),
  404: errorContent("Unknown adapter"),
  503: errorContent("Model server or adapter unavailable (retryable)"),
};

/** Rethrows a model-server failure as a retryable 503, so callers never mistake it for a bad request. */
function upstream(err: unknown): never {
  if (err instanceof ServiceError && err.status < 500 && err.status !== 404) throw err;
  const message = err instanceof Error ? err.message : String(err);
  throw httpError(503, "model_server_unavailable", `model server: ${message}`, { retryable: true });
}

/**
 * Routes a request to the base model or an adapter version, on a model server that has it, and
 * stamps the answer with the version and hash that served it. If vLLM no longer knows a version we
 * serve, it restarted: the caller gets a retryable 503 (never the base model) while the monitor
 * reloads.
 */
async function routed<T>(
  pool: ModelPool,
  manager: AdapterManager,
  model: string | undefined,
  call: (vllm: VllmClient, served: string) => Promise<T>,
): Promise<{ value: T; adapter: AdapterStamp }> {
  const target = model ?? (await pool.baseModel().catch(upstream));
  const version = manager.resolve(target);
  try {
    const served = version?.servedName ?? target;
    const value = await call(pool.client(served), served);
    const adapter = version
      ? { name: version.name, version: version.version, servedName: version.servedName, hash: version.hash }
      : null;
    return { value, adapter };
  } catch (err) {
    if (version && err instanceof ServiceError && err.status === 404) {
      manager.suspectLoss();
      throw httpError(503, "adapter_reloading", `${version.servedName} is being reloaded; retry shortly`, {
        retryable: true,
      });
    }
    return upstream(err);
  }
}

export function modelRoutes(pool: ModelPool, manager: AdapterManager) {
  return createRouter()
    .openapi(
      createRoute({
        method: "get",
        path: "/base-model",
        summary: "The base model the model servers serve, and the adapters loaded on every one that is up",
        responses: {
          200: jsonContent(BaseModelInfo, "Base model"),
          503: errors[503],
        },
      }),
      async (c) => c.json(await pool.survey().catch(upstream), 200),
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/nodes",
        summary: "The model servers behind serving, whether each is up, and what each serves now",
        description:
          "The guard routes each call to a node that lists its model; every node serves the same base model",
        responses: {
          200: jsonContent(ModelNodes, "The pool"),
        },
      }),
      (c) => c.json(manager.nodes(), 200),
    )
    .openapi(
      createRoute({
        method: "post",
        path: "/completions",
        summary: "A short completion with token ids and logprobs, stamped with the adapter that served it",
        request: { body: jsonBody(CompletionRequest) },
        responses: {
          200: jsonContent(CompletionResult, "Completion"),
          ...errors,
        },
      }),
      async (c) => {
        const body = c.req.valid("json");
        const { value, adapter } = await routed(pool, manager, body.model, (vllm, model) =>
          vllm.complete({ ...body, model, seed: body.seed }),
        );
        return c.json({ ...value, adapter }, 200);
      },
    )
    .openapi(
      createRoute({
        method: "post",
        path: "/score",
        summary: "Log-probabilities of given completion tokens after a prompt (nothing is sampled)",
        request: { body: jsonBody(ScoreRequest) },
        responses: {
          200: jsonContent(ScoreResult, "Scores"),
          ...errors,
        },
      }),
      async (c) => {
        const body = c.req.valid("json");
        const { value, adapter } = await routed(pool, manager, body.model, async (vllm, model) => ({
          model,
          all: await vllm.promptLogprobs(model, [...body.promptTokenIds, ...body.completionTokenIds]),
        }));
        const logprobs = value.all.slice(body.promptTokenIds.length - 1);
        const sum = logprobs.reduce((a, b) => a + b, 0);
        return c.json({ model: value.model, adapter, logprobs, sum }, 200);
      },
    );
}
