import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { httpError } from "./errors.ts";

const digest = (s: string) => createHash("sha256").update(s).digest();

/**
 * Whether `header` is `Bearer <token>`, compared in constant time (both sides hashed first, so
 * neither the token's characters nor its length leak through timing).
 */
export function bearerMatches(header: string | undefined, token: string): boolean {
  return timingSafeEqual(digest(header ?? ""), digest(`Bearer ${token}`));
}

/** Middleware that answers 401 with `message` unless the request carries the bearer token. */
export function requireBearer(token: string, message: string): MiddlewareHandler {
  return async (c, next) => {
    if (!bearerMatches(c.req.header("authorization"), token)) throw httpError(401, "unauthorized", message);
    await next();
  };
}

const REQUEST_ID = /^[\w\-.:]{1,255}$/;

/** A caller's `x-request-id` when it is 1-255 characters of `[A-Za-z0-9_.:-]`, else a new UUID. */
export function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === "string" && REQUEST_ID.test(header) ? header : randomUUID();
}
