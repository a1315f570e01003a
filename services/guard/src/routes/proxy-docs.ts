import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";

/** The harness's own request: the guard checks what it needs and passes the rest on. */
const Passthrough = (what: string) => z.object({}).passthrough().describe(what);
const ApiError = z
  .object({ error: z.object({ message: z.string() }).passthrough() })
  .passthrough()
  .describe("In the calling API's own error shape (OpenAI or Anthropic)");

const responses = (answer: string) => ({
  200: {
    description: `${answer}; with \`stream: true\`, server-sent events in the same API's streaming format`,
    content: {
      "application/json": { schema: Passthrough(answer) },
      "text/event-stream": { schema: z.string() },
    },
  },
  400: {
    description: "Malformed JSON, or a request the guard cannot check (`n` > 1)",
    content: { "application/json": { schema: ApiError } },
  },
  401: {
    description: "No API key, or one no session is registered for",
    content: { "application/json": { schema: ApiError } },
  },
  413: { description: "Body over the guard's limit", content: { "application/json": { schema: ApiError } } },
  502: {
    description: "The model server failed (retryable)",
    content: { "application/json": { schema: ApiError } },
  },
  503: {
    description: "The model server is unreachable (retryable, `retry-after: 1`)",
    content: { "application/json": { schema: ApiError } },
  },
});

/**
 * Puts the harness-facing routes in /openapi.json. The guard's server answers the two model-call
 * routes itself (server.ts) and the Hono app serves them in-process; neither goes through a zod
 * validator, since the guard accepts whatever the harness's API accepts.
 */
export function documentProxyRoutes(app: Pick<OpenAPIHono, "openAPIRegistry">): void {
  const security = [{ sessionKey: [] }, { anthropicKey: [] }];
  app.openAPIRegistry.registerComponent("securitySchemes", "sessionKey", { type: "http", scheme: "bearer" });
  app.openAPIRegistry.registerComponent("securitySchemes", "anthropicKey", {
    type: "apiKey",
    in: "header",
    name: "x-api-key",
  });
  app.openAPIRegistry.registerPath({
    method: "post",
    path: "/v1/chat/completions",
    summary: "OpenAI Chat Completions through the guard: every tool call checked before it is released",
    security,
    request: {
      body: { content: { "application/json": { schema: Passthrough("An OpenAI chat completion request") } } },
    },
    responses: responses("An OpenAI chat completion"),
  });
  app.openAPIRegistry.registerPath({
    method: "post",
    path: "/v1/messages",
    summary: "Anthropic Messages, translated to the OpenAI-compatible model server and back",
    security,
    request: {
      body: { content: { "application/json": { schema: Passthrough("An Anthropic Messages request") } } },
    },
    responses: responses("An Anthropic message"),
  });
  app.openAPIRegistry.registerPath({
    method: "get",
    path: "/v1/models",
    summary: "The one model a session sees: its adapter",
    security,
    responses: {
      200: {
        description: "The session's adapter as the only model",
        content: { "application/json": { schema: Passthrough("An OpenAI model list") } },
      },
      401: { description: "No or unknown API key", content: { "application/json": { schema: ApiError } } },
    },
  });
}
