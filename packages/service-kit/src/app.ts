import type { ErrorBody } from "@bridle/contracts";
import { type Hook, OpenAPIHono } from "@hono/zod-openapi";
import type { Env } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { requestIdOf } from "./auth.ts";
import { errorAnswer, httpError, issuesOf } from "./errors.ts";
import type { Logger } from "./logger.ts";

/** Per-request context every handler can read: `c.get("log")`, `c.get("requestId")`. */
export interface ServiceEnv extends Env {
  Variables: { log: Logger; requestId: string };
}

export interface AppOptions {
  name: string;
  version?: string;
  description?: string;
  log: Logger;
  bodyLimitBytes?: number | undefined;
}

/**
 * The shared validation hook: any zod failure in params, query, headers or body becomes a 400
 * whose issues carry paths such as `body.maxTokens`.
 */
export const validationHook: Hook<unknown, ServiceEnv, string, unknown> = (result, _c) => {
  if (!result.success) {
    const target = (result as { target?: string }).target;
    throw httpError(400, "invalid_request", "The request does not match the API contract", {
      issues: issuesOf(result.error, target === "json" ? "body" : target),
    });
  }
};

/** A sub-app for one resource, with the shared validation hook; mount it with `app.route()`. */
export function createRouter(): OpenAPIHono<ServiceEnv> {
  return new OpenAPIHono<ServiceEnv>({ defaultHook: validationHook });
}

/**
 * Creates a service's Hono app: request ids, a child logger per request, a body size limit (413),
 * JSON 404s, one error handler, `/healthz`, and the OpenAPI document at `/openapi.json`.
 */
export function createApp(options: AppOptions): OpenAPIHono<ServiceEnv> {
  const app = createRouter();
  const limit = options.bodyLimitBytes ?? 8 * 1024 * 1024;

  app.use("*", async (c, next) => {
    const requestId = requestIdOf(c.req.header("x-request-id"));
    c.set("requestId", requestId);
    c.set("log", options.log.child({ requestId }));
    c.header("x-request-id", requestId);
    await next();
  });
  app.use(
    "*",
    bodyLimit({
      maxSize: limit,
      onError: () => {
        throw httpError(413, "payload_too_large", `Request body is larger than the limit of ${limit} bytes`);
      },
    }),
  );

  app.get("/healthz", (c) => c.json({ ok: true, service: options.name }));
  app.doc31("/openapi.json", {
    openapi: "3.1.0",
    info: {
      title: `Bridle ${options.name}`,
      version: options.version ?? "0.1.0",
      ...(options.description ? { description: options.description } : {}),
    },
  });

  app.notFound((c) =>
    c.json<ErrorBody>(
      { error: { code: "not_found", message: `No route ${c.req.method} ${c.req.path}`, retryable: false } },
      404,
    ),
  );
  app.onError((err, c) => {
    const requestId = c.get("requestId");
    const { status, unexpected, ...error } = errorAnswer(err);
    if (unexpected) (c.get("log") ?? options.log).error({ err, requestId }, "unhandled error");
    return c.json<ErrorBody>({ error: { ...error, requestId } }, status as ContentfulStatusCode);
  });
  return app;
}
