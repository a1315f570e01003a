import { existsSync, readFileSync } from "node:fs";
import { HarnessCheck, RolloutRequest, RolloutResult, RolloutState } from "@bridle/contracts";
import {
  ATTEMPT_HEADER,
  attemptOf,
  callJson,
  createRouter,
  errorAnswer,
  errorContent,
  httpError,
  jsonBody,
  jsonContent,
  type Logger,
  Semaphore,
  ServiceError,
} from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import { harnesses } from "../harnesses/index.ts";
import type { HarnessAdapter } from "../harnesses/types.ts";
import { RolloutCancelled, type RolloutDeps, resultPath, runRollout, unavailable } from "../rollout.ts";

/** What a submitted rollout that failed answers its poller; kept for the last few hundred. */
type Failed = Extract<RolloutState, { state: "failed" }>;
const FAILURES_KEPT = 500;

/** The path parameter naming a rollout (its rolloutId). */
const RolloutIdParam = z.object({ id: z.string().min(1).max(120) });

/**
 * Bounds concurrent rollouts, runs a rollout id at most once at a time, cancels one on request, and
 * remembers how submitted ones failed (a finished one's result is stored on disk).
 */
class Scheduler {
  private readonly limiter: Semaphore;
  /** Each rollout in flight, with the latest activity attempt that waits for it. */
  private readonly inFlight = new Map<
    string,
    { result: Promise<RolloutResult>; stop: AbortController; attempt: number; startedAt: number }
  >();
  private readonly failures = new Map<string, Failed>();

  constructor(limit: number) {
    this.limiter = new Semaphore(limit);
  }

  run(
    id: string | undefined,
    attempt: number,
    work: (signal: AbortSignal) => Promise<RolloutResult>,
  ): Promise<RolloutResult> {
    const existing = id ? this.inFlight.get(id) : undefined;
    if (existing) {
      existing.attempt = Math.max(existing.attempt, attempt);
      return existing.result;
    }
    const stop = new AbortController();
    const result = this.limiter
      .run(() => (stop.signal.aborted ? Promise.reject(cancelled(id)) : work(stop.signal)))
      .finally(() => {
        if (id) this.inFlight.delete(id);
      });
    if (id) {
      this.failures.delete(id);
      this.inFlight.set(id, { result, stop, attempt, startedAt: Date.now() });
    }
    return result;
  }

  /** Starts a rollout (or joins the one in flight) without waiting; its state says how it went. */
  submit(id: string, attempt: number, work: (signal: AbortSignal) => Promise<RolloutResult>, log: Logger) {
    this.run(id, attempt, work).catch((err: unknown) => {
      const {
        unexpected,
        issues: _issues,
        ...error
      } = errorAnswer(
        err instanceof RolloutCancelled ? httpError(409, "rollout_cancelled", err.message) : err,
      );
      if (unexpected) log.error({ err, rolloutId: id }, "rollout failed");
      this.failures.set(id, { state: "failed", rolloutId: id, error });
      if (this.failures.size > FAILURES_KEPT) this.failures.delete(this.failures.keys().next().value!);
    });
  }

  /** A rollout running or failed here; undefined otherwise (finished ones are read from disk). */
  state(id: string): RolloutState | undefined {
    const running = this.inFlight.get(id);
    if (running) return { state: "running", rolloutId: id, elapsedMs: Date.now() - running.startedAt };
    return this.failures.get(id);
  }

  /**
   * Cancels a rollout in flight (or waiting for a slot). An earlier attempt of the activity (one
   * that timed out while its retry took the rollout over) cannot cancel it from under the later one.
   */
  cancel(id: string, attempt: number): "cancelled" | "not_in_flight" | "superseded" {
    const running = this.inFlight.get(id);
    if (!running) return "not_in_flight";
    if (attempt < running.attempt) return "superseded";
    running.stop.abort();
    return "cancelled";
  }
}

const cancelled = (id: string | undefined) => new RolloutCancelled(`rollout ${id} was cancelled`);

/**
 * The stored conformance check of a harness's pinned version, from the tasks service (where `bridle
 * harness check` stores them, so every runner reads the same); null when it was never checked.
 */
async function storedCheck(deps: RolloutDeps, harness: HarnessAdapter): Promise<HarnessCheck | null> {
  const url = `${deps.tasksUrl}/v1/harness-checks/${harness.name}/${encodeURIComponent(harness.version)}`;
  return callJson(url, { schema: HarnessCheck, timeoutMs: 10_000 }).catch((err: unknown) => {
    if (err instanceof ServiceError && err.status === 404) return null;
    return unavailable("the tasks service (harness checks)", err);
  });
}

export function rolloutRoutes(deps: RolloutDeps, maxConcurrent: number) {
  const scheduler = new Scheduler(maxConcurrent);
  /** A finished rollout's stored result, as a state. */
  const stored = (id: string): Extract<RolloutState, { state: "done" }> | undefined => {
    const file = resultPath(deps.dataDir, id);
    if (!existsSync(file)) return undefined;
    return {
      state: "done",
      rolloutId: id,
      result: RolloutResult.parse(JSON.parse(readFileSync(file, "utf8"))),
    };
  };
  return createRouter()
    .openapi(
      createRoute({
        method: "post",
        path: "/",
        summary:
          "Run one rollout to the end and return its result (idempotent by rolloutId); with ?wait=false, submit it and poll GET /{id}/state",
        request: {
          body: jsonBody(RolloutRequest),
          query: z.object({
            wait: z
              .enum(["true", "false"])
              .default("true")
              .describe("false: answer at once (202) with the rollout's state; needs a rolloutId"),
          }),
        },
        responses: {
          200: jsonContent(RolloutResult, "Result"),
          202: jsonContent(RolloutState, "Submitted (?wait=false): its state, running or already done"),
          400: errorContent("Invalid request"),
          404: errorContent("Unknown task"),
          409: errorContent(
            "A training rollout of a harness version whose conformance check failed, or a cancelled one",
          ),
          503: errorContent("A service the rollout needs is down (retryable)"),
        },
      }),
      async (c) => {
        const request = c.req.valid("json");
        const harness = harnesses[request.harness];
        if (!harness) {
          throw httpError(400, "unknown_harness", `unknown harness '${request.harness}'`, {
            issues: [{ path: "body.harness", message: `one of ${Object.keys(harnesses).join(", ")}` }],
          });
        }
        // Training never learns from a harness version that failed its conformance check: its
        // trajectories would not be what the harness really sent and received.
        const check = request.capture ? await storedCheck(deps, harness) : null;
        if (check && !check.passed) {
          const failed = check.properties.filter((p) => !p.passed);
          throw httpError(
            409,
            "harness_check_failed",
            `${harness.name} ${harness.version} failed its conformance check of ${check.checkedAt} (${failed.map((p) => `${p.name}: ${p.detail}`).join("; ")}): training refuses it until 'bridle harness check ${harness.name}' passes`,
          );
        }
        const attempt = attemptOf(c.req.header(ATTEMPT_HEADER), 0);
        const work = (signal: AbortSignal) => runRollout(deps, request, signal);
        if (c.req.valid("query").wait === "false") {
          const id = request.rolloutId;
          if (!id)
            throw httpError(400, "invalid_request", "a submitted rollout (?wait=false) needs a rolloutId", {
              issues: [{ path: "body.rolloutId", message: "required with ?wait=false" }],
            });
          const done = stored(id);
          if (done) return c.json(done, 202);
          scheduler.submit(id, attempt, work, c.get("log"));
          return c.json(
            scheduler.state(id) ?? { state: "running" as const, rolloutId: id, elapsedMs: 0 },
            202,
          );
        }
        const result = await scheduler.run(request.rolloutId, attempt, work).catch((err: unknown) => {
          if (err instanceof RolloutCancelled) throw httpError(409, "rollout_cancelled", err.message);
          throw err;
        });
        return c.json(result, 200);
      },
    )
    .openapi(
      createRoute({
        method: "delete",
        path: "/{id}",
        summary: "Cancel a rollout in flight: its harness is killed, its sandbox removed, nothing stored",
        request: { params: RolloutIdParam },
        responses: {
          202: jsonContent(
            z.object({ rolloutId: z.string(), cancelled: z.literal(true) }),
            "Cancelled: its POST answers 409 rollout_cancelled once the harness is gone",
          ),
          404: errorContent("No rollout in flight with this id"),
          409: errorContent("A later attempt of the caller's activity waits for this rollout"),
        },
      }),
      (c) => {
        const { id } = c.req.valid("param");
        // Without an attempt (a person cancelling by hand) the rollout is cancelled whoever waits.
        const outcome = scheduler.cancel(
          id,
          attemptOf(c.req.header(ATTEMPT_HEADER), Number.POSITIVE_INFINITY),
        );
        if (outcome === "not_in_flight")
          throw httpError(404, "not_in_flight", `no rollout '${id}' is in flight`);
        if (outcome === "superseded")
          throw httpError(409, "superseded", `a later attempt waits for rollout '${id}'; it goes on`);
        c.get("log").info({ rolloutId: id }, "rollout cancelled");
        return c.json({ rolloutId: id, cancelled: true as const }, 202);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/{id}",
        summary: "A finished rollout's result",
        request: { params: RolloutIdParam },
        responses: {
          200: jsonContent(RolloutResult, "Result"),
          404: errorContent("No finished rollout with this id"),
        },
      }),
      (c) => {
        const done = stored(c.req.valid("param").id);
        if (!done) throw httpError(404, "not_found", "no finished rollout with this id");
        return c.json(done.result, 200);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/{id}/state",
        summary: "A submitted rollout's state: running, done with its result, or failed with its error",
        request: { params: RolloutIdParam },
        responses: {
          200: jsonContent(RolloutState, "State"),
          404: errorContent("Not running, not finished and no failure remembered: submit it again"),
        },
      }),
      (c) => {
        const { id } = c.req.valid("param");
        const state = scheduler.state(id) ?? stored(id);
        if (!state) throw httpError(404, "not_found", `no rollout '${id}' is running or finished here`);
        return c.json(state, 200);
      },
    )
    .get("/harnesses/list", async (c) =>
      c.json(
        await Promise.all(
          Object.values(harnesses).map(async (h) => {
            const check = await storedCheck(deps, h);
            return {
              name: h.name,
              api: h.api,
              version: h.version,
              check: check
                ? {
                    passed: check.passed,
                    checkedAt: check.checkedAt,
                    failed: check.properties.filter((p) => !p.passed).map((p) => p.name),
                  }
                : null,
            };
          }),
        ),
      ),
    );
}
