import type { Issue } from "@bridle/contracts";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ZodError } from "zod";

/** Turns zod issues into `{path, message}` pairs whose paths start at the request part. */
export function issuesOf(error: ZodError, prefix?: string): Issue[] {
  return error.issues.map((issue) => ({
    path: [prefix, ...issue.path.map(String)].filter((part) => part !== undefined).join(".") || "(root)",
    message: issue.message,
  }));
}

/**
 * Bridle's one error type: a failure with an HTTP status, a stable code, and whether retrying can
 * help. A route throws it (through `httpError`) and the app's error handler renders it; `callJson`
 * raises it for a failed call to another service; the guard renders it in the harness's own API
 * format; the trainer reports its worker's step failures with it; activities map it to Temporal.
 */
export class ServiceError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly retryable: boolean,
    /** The answer's body, when the error is another service's answer. */
    readonly body?: unknown,
    /** Which fields of a request were wrong, when a request was refused for its content. */
    readonly issues?: Issue[],
  ) {
    super(message);
    this.name = "ServiceError";
  }
}

/**
 * An HTTP error with a stable code, for a route to throw instead of an ad-hoc `c.json(..., 4xx)`:
 * Hono's exception, carrying the ServiceError that the app's error handler renders. (A ServiceError
 * thrown as it is, say from a failed call to another service, stays an internal error there.)
 */
export function httpError(
  status: ContentfulStatusCode,
  code: string,
  message: string,
  extra: { retryable?: boolean; issues?: Issue[] } = {},
): HTTPException {
  const cause = new ServiceError(
    message,
    status,
    code,
    extra.retryable ?? status >= 502,
    undefined,
    extra.issues,
  );
  return new HTTPException(status, { message, cause });
}
