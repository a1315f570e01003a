import { createApp, type Logger, requireBearer } from "@bridle/service-kit";
import type { Context } from "hono";
import type { GuardStore } from "./capture.ts";
import type { EffectsCache } from "./proxy/judge.ts";
import type { ModelRouter } from "./proxy/router.ts";
import type { ServedModels } from "./proxy/served.ts";
import type { StreamDeadlines } from "./proxy/upstream.ts";
import { adminRoutes } from "./routes/admin.ts";
import { proxyRoutes } from "./routes/proxy.ts";
import { documentProxyRoutes } from "./routes/proxy-docs.ts";

export interface GuardDeps {
  log: Logger;
  store: GuardStore;
  upstream: ModelRouter;
  deadlines: StreamDeadlines;
  adminToken?: string | undefined;
  maxTokensCap?: number | undefined;
  served?: ServedModels | undefined;
  effects?: EffectsCache | undefined;
  bodyLimitBytes?: number;
}

/** The guard: checks every tool call between harnesses and the model server, and captures trajectories. */
export function createGuardApp(deps: GuardDeps) {
  const app = createApp({
    name: "guard",
    description:
      "Tool-call checking proxy (OpenAI Chat Completions and Anthropic Messages) with trajectory capture",
    log: deps.log,
    bodyLimitBytes: deps.bodyLimitBytes,
  });
  if (deps.adminToken) {
    // A trajectory can also be read with its session's read grant (`?grant=`), derived from the
    // admin token: the URL a worker hands the trainer opens that one trajectory and nothing else.
    const trajectoryOf = (c: Context) => {
      const id = /^\/admin\/sessions\/([^/]+)\/trajectory$/.exec(c.req.path)?.[1];
      return id === undefined ? undefined : decodeURIComponent(id);
    };
    app.use(
      "/admin/*",
      requireBearer(deps.adminToken, "The admin API needs the guard's admin token", trajectoryOf),
    );
  }
  app.route("/admin", adminRoutes(deps.store));
  documentProxyRoutes(app);
  app.route(
    "/",
    proxyRoutes(
      {
        store: deps.store,
        upstream: deps.upstream,
        log: deps.log,
        deadlines: deps.deadlines,
        maxTokensCap: deps.maxTokensCap,
        served: deps.served,
        effects: deps.effects,
      },
      deps.log,
    ),
  );
  return app;
}
