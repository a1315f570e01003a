import { existsSync, readFileSync } from "node:fs";
import { RolloutRequest, RolloutResult } from "@bridle/contracts";
import { createRouter, errorContent, httpError } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import { harnesses } from "../harnesses/index.ts";
import { type RolloutDeps, resultPath, runRollout } from "../rollout.ts";

/** Bounds concurrent rollouts and runs a rollout id at most once at a time. */
class Scheduler {
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly inFlight = new Map<string, Promise<RolloutResult>>();

  constructor(private readonly limit: number) {}

  run(id: string | undefined, work: () => Promise<RolloutResult>): Promise<RolloutResult> {
    const existing = id ? this.inFlight.get(id) : undefined;
    if (existing) return existing;
    const promise = this.acquire()
      .then(work)
      .finally(() => {
        this.release();
        if (id) this.inFlight.delete(id);
      });
    if (id) this.inFlight.set(id, promise);
    return promise;
  }

  private async acquire(): Promise<void> {
    if (this.running < this.limit) {
      this.running++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }
}

export function rolloutRoutes(deps: RolloutDeps, maxConcurrent: number) {
  const scheduler = new Scheduler(maxConcurrent);
  return createRouter()
    .openapi(
      createRoute({
        method: "post",
        path: "/",
        summary: "Run one rollout to the end and return its result (idempotent by rolloutId)",
        request: { body: { content: { "application/json": { schema: RolloutRequest } }, required: true } },
        responses: {
          200: { description: "Result", content: { "application/json": { schema: RolloutResult } } },
          400: errorContent("Invalid request"),
          404: errorContent("Unknown task"),
          503: errorContent("A service the rollout needs is down (retryable)"),
        },
      }),
      async (c) => {
        const request = c.req.valid("json");
        if (!harnesses[request.harness]) {
          throw httpError(400, "unknown_harness", `unknown harness '${request.harness}'`, {
            issues: [{ path: "body.harness", message: `one of ${Object.keys(harnesses).join(", ")}` }],
          });
        }
        return c.json(await scheduler.run(request.rolloutId, () => runRollout(deps, request)), 200);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/{id}",
        summary: "A finished rollout's result",
        request: { params: z.object({ id: z.string().min(1).max(120) }) },
        responses: {
          200: { description: "Result", content: { "application/json": { schema: RolloutResult } } },
          404: errorContent("No finished rollout with this id"),
        },
      }),
      (c) => {
        const file = resultPath(deps.dataDir, c.req.valid("param").id);
        if (!existsSync(file)) throw httpError(404, "not_found", "no finished rollout with this id");
        return c.json(RolloutResult.parse(JSON.parse(readFileSync(file, "utf8"))), 200);
      },
    )
    .get("/harnesses/list", (c) =>
      c.json(Object.values(harnesses).map((h) => ({ name: h.name, api: h.api, version: h.version }))),
    );
}
