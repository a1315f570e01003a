import type { Logger } from "@bridle/service-kit";
import { type Context, Hono } from "hono";
import { handleProxyCall, type ProxyDeps } from "../proxy/handle.ts";
import { type Api, errorResponse, sessionOf, sseResponse } from "../proxy/http.ts";

export type { ProxyDeps };

/**
 * The harness-facing API inside the Hono app: `POST /v1/chat/completions` (OpenAI),
 * `POST /v1/messages` (Anthropic), `GET /v1/models`. The guard's server sends the two hot POST
 * routes straight to `handleProxyCall` (see server.ts); these routes serve `app.request()` and
 * any other host of the app, with the very same behaviour.
 */
export function proxyRoutes(deps: ProxyDeps, log: Logger) {
  const app = new Hono();

  const handle = async (api: Api, c: Context) => {
    const outcome = await handleProxyCall(deps, log, api, (name) => c.req.header(name), await c.req.text());
    if ("stream" in outcome) return sseResponse(outcome.abort, outcome.stream);
    return new Response(JSON.stringify(outcome.json), {
      status: outcome.status,
      headers: { ...outcome.headers, "content-type": "application/json" },
    });
  };

  app.post("/v1/chat/completions", (c) => handle("openai", c));
  app.post("/v1/messages", (c) => handle("anthropic", c));
  app.get("/v1/models", async (c) => {
    try {
      const session = await sessionOf((name) => c.req.header(name), deps.store);
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
