import type { Logger } from "@bridle/service-kit";
import { type Context, Hono } from "hono";
import type { CaptureStore } from "../capture.ts";
import { toOpenAIRequest } from "../proxy/anthropic-request.ts";
import { AnthropicCollector, AnthropicStreamWriter } from "../proxy/anthropic-response.ts";
import { type ExchangeDeps, openExchange } from "../proxy/exchange.ts";
import { type Api, errorResponse, jsonBody, ProxyError, sessionOf, sseResponse } from "../proxy/http.ts";
import { OpenAICollector, OpenAIStreamWriter } from "../proxy/openai.ts";
import { UpstreamError } from "../proxy/upstream.ts";

export interface ProxyDeps extends ExchangeDeps {
  store: CaptureStore;
  /** Clamp for `max_tokens` (harnesses ask for more than small served models allow). */
  maxTokensCap?: number | undefined;
}

/** Fields of an OpenAI request that the guard decides, not the harness. */
const GUARD_FIELDS = ["model", "stream", "stream_options"];

/**
 * The harness-facing API: `POST /v1/chat/completions` (OpenAI), `POST /v1/messages` (Anthropic),
 * `GET /v1/models`. Errors use each API's own error shape so the harness's SDK understands them.
 */
export function proxyRoutes(deps: ProxyDeps, log: Logger) {
  const app = new Hono();

  const handle = async (api: Api, c: Context) => {
    try {
      const session = sessionOf(c, deps.store);
      const body = await jsonBody(c);
      const request = api === "openai" ? openAIRequest(body) : toOpenAIRequest(body);
      if (deps.maxTokensCap) capMaxTokens(request, deps.maxTokensCap);
      const stream = body.stream === true;
      const abort = new AbortController();
      const pump = await openExchange({ ...deps, log }, session, api, request, stream, abort.signal);
      if (stream) {
        const includeUsage =
          (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
        return sseResponse(abort, (write) =>
          pump(
            api === "openai"
              ? new OpenAIStreamWriter(write, session.adapter, includeUsage)
              : new AnthropicStreamWriter(write, session.adapter),
          ),
        );
      }
      const sink = api === "openai" ? new OpenAICollector() : new AnthropicCollector();
      await pump(sink);
      if (sink.failure) throw new ProxyError(502, "upstream_error", sink.failure, true);
      return c.json(sink.body() as object, 200);
    } catch (err) {
      if (!(err instanceof ProxyError) && !(err instanceof UpstreamError))
        log.error({ err, api }, "proxy failure");
      else if (err instanceof UpstreamError)
        log.warn({ status: err.status, message: err.message }, "upstream failure");
      return errorResponse(api, err);
    }
  };

  app.post("/v1/chat/completions", (c) => handle("openai", c));
  app.post("/v1/messages", (c) => handle("anthropic", c));
  app.post("/v1/messages/count_tokens", () =>
    errorResponse("anthropic", new ProxyError(404, "not_found", "count_tokens is not served by the guard")),
  );
  app.get("/v1/models", (c) => {
    try {
      const session = sessionOf(c, deps.store);
      return c.json({
        object: "list",
        data: [
          {
            id: session.adapter,
            object: "model",
            created: 0,
            owned_by: "bridle",
            type: "model",
            display_name: session.adapter,
          },
        ],
      });
    } catch (err) {
      return errorResponse("openai", err);
    }
  });
  // Claude Code probes the base URL before its first call.
  app.on("HEAD", ["/", "/api/hello"], (c) => c.body(null, 200));
  return app;
}

function openAIRequest(body: Record<string, unknown>): Record<string, unknown> {
  if (!Array.isArray(body.messages)) {
    throw new ProxyError(400, "invalid_request", "`messages` must be an array of chat messages");
  }
  const out = { ...body };
  for (const field of GUARD_FIELDS) delete out[field];
  return out;
}

function capMaxTokens(request: Record<string, unknown>, cap: number): void {
  for (const key of ["max_tokens", "max_completion_tokens"]) {
    if (typeof request[key] === "number" && (request[key] as number) > cap) request[key] = cap;
  }
}
