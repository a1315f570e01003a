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

/** An error as Bridle answers it: what the error body and status say. */
export interface ErrorAnswer {
  status: number;
  code: string;
  message: string;
  retryable: boolean;
  issues?: Issue[];
  /** Not an error a route meant to raise: the caller logs it (its message is generic). */
  unexpected: boolean;
}

/**
 * How an error is answered: an HTTP error (`httpError`, Hono's own) by its status and ServiceError
 * cause, anything else as an internal, retryable 500. The app's error handler renders this, and so
 * does a service that reports a failed background job to whoever polls it.
 */
export function errorAnswer(err: unknown): ErrorAnswer {
  if (err instanceof HTTPException) {
    const cause = err.cause instanceof ServiceError ? err.cause : undefined;
    const code = cause?.code ?? codeForStatus(err.status);
    return {
      status: err.status,
      code,
      message: err.message || code,
      retryable: cause?.retryable ?? err.status >= 502,
      ...(cause?.issues ? { issues: cause.issues } : {}),
      unexpected: false,
    };
  }
  return {
    status: 500,
    code: "internal",
    message: "Internal error; see the service log",
    retryable: true,
    unexpected: true,
  };
}

function codeForStatus(status: number): string {
  if (status === 400) return "invalid_request";
  if (status === 401) return "unauthorized";
  if (status === 404) return "not_found";
  if (status === 413) return "payload_too_large";
  return status >= 500 ? "upstream_error" : "request_error";
}
