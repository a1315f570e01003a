import { createHash, createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import type { Context, MiddlewareHandler } from "hono";
import { httpError } from "./errors.ts";

const digest = (s: string) => createHash("sha256").update(s).digest();

/**
 * Whether `header` is `Bearer <token>`, compared in constant time (both sides hashed first, so
 * neither the token's characters nor its length leak through timing).
 */
export function bearerMatches(header: string | undefined, token: string): boolean {
  return timingSafeEqual(digest(header ?? ""), digest(`Bearer ${token}`));
}

/**
 * Middleware that answers 401 with `message` unless the request carries the bearer token, or
 * `grantFor` names the one resource this request reads (a GET of it) and its `?grant=` is that
 * resource's read grant under the token (see `readGrant`).
 */
export function requireBearer(
  token: string,
  message: string,
  grantFor?: (c: Context) => string | undefined,
): MiddlewareHandler {
  return async (c, next) => {
    const granted = () => {
      const what = c.req.method === "GET" ? grantFor?.(c) : undefined;
      return what !== undefined && grantMatches(token, what, c.req.query("grant"));
    };
    if (!bearerMatches(c.req.header("authorization"), token) && !granted())
      throw httpError(401, "unauthorized", message);
    await next();
  };
}

/**
 * A read grant: the right to read one resource (`what`, e.g. a guard session's trajectory), derived
 * from a service's secret so the service needs no record of the grants it gave. Whoever holds the
 * secret (the guard, its runners and workers) can make one; a grant reveals nothing of the secret
 * and opens nothing else, so a URL carrying it can be handed to a reader that holds no token.
 */
export function readGrant(secret: string, what: string): string {
  return createHmac("sha256", secret).update(`bridle-read-grant\0${what}`).digest("hex");
}

/** Whether `grant` is the read grant of `what` under `secret`, compared in constant time. */
export function grantMatches(secret: string, what: string, grant: string | undefined): boolean {
  return timingSafeEqual(digest(grant ?? ""), digest(readGrant(secret, what)));
}

const REQUEST_ID = /^[\w\-.:]{1,255}$/;

/** A caller's `x-request-id` when it is 1-255 characters of `[A-Za-z0-9_.:-]`, else a new UUID. */
export function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === "string" && REQUEST_ID.test(header) ? header : randomUUID();
}
