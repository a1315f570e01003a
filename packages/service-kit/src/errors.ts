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

/** The cause carried by a Bridle HTTPException, rendered into the error body by `onError`. */
export interface ErrorCause {
  code: string;
  retryable?: boolean;
  issues?: Issue[];
}

/** Throws an HTTP error with a stable code. Use this instead of ad-hoc `c.json(..., 4xx)`. */
export function httpError(
  status: ContentfulStatusCode,
  code: string,
  message: string,
  extra: Omit<ErrorCause, "code"> = {},
): HTTPException {
  return new HTTPException(status, { message, cause: { code, ...extra } satisfies ErrorCause });
}

export function isErrorCause(value: unknown): value is ErrorCause {
  return typeof value === "object" && value !== null && typeof (value as ErrorCause).code === "string";
}
