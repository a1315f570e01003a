import { BaseModelInfo, CompletionRequest, CompletionResult, ErrorBody } from "@bridle/contracts";
import { createRouter, httpError, ServiceError } from "@bridle/service-kit";
import { createRoute } from "@hono/zod-openapi";
import type { VllmClient } from "../vllm.ts";

const errors = {
  400: { description: "Invalid request", content: { "application/json": { schema: ErrorBody } } },
  503: {
    description: "Model server unavailable (retryable)",
    content: { "application/json": { schema: ErrorBody } },
  },
};

/** Rethrows a model-server failure as a retryable 503, so callers never mistake it for a bad request. */
function upstream(err: unknown): never {
  if (err instanceof ServiceError && err.status < 500 && err.status !== 404) throw err;
  const message = err instanceof Error ? err.message : String(err);
  throw httpError(503, "model_server_unavailable", `model server: ${message}`, { retryable: true });
}

export function modelRoutes(vllm: VllmClient) {
  return createRouter()
    .openapi(
      createRoute({
        method: "get",
        path: "/base-model",
        summary: "The base model the model server serves, and the adapters loaded on it",
        responses: {
          200: { description: "Base model", content: { "application/json": { schema: BaseModelInfo } } },
          503: errors[503],
        },
      }),
      async (c) => c.json(await vllm.baseModel().catch(upstream), 200),
    )
    .openapi(
      createRoute({
        method: "post",
        path: "/completions",
        summary: "A short completion with token ids and logprobs",
        request: { body: { content: { "application/json": { schema: CompletionRequest } }, required: true } },
        responses: {
          200: { description: "Completion", content: { "application/json": { schema: CompletionResult } } },
          ...errors,
        },
      }),
      async (c) => {
        const body = c.req.valid("json");
        const model = body.model ?? (await vllm.baseModel().catch(upstream)).id;
        const result = await vllm.complete({ ...body, model, seed: body.seed }).catch(upstream);
        return c.json(result, 200);
      },
    );
}
