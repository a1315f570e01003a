import { ErrorBody } from "@bridle/contracts";
import type { z } from "zod";

/** A failed call to another Bridle service (or the model server), with what the caller needs. */
export class ServiceError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly retryable: boolean,
    readonly body?: unknown,
  ) {
    super(message);
    this.name = "ServiceError";
  }
}

export interface CallOptions<S extends z.ZodType> {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  body?: unknown;
  headers?: Record<string, string>;
  /** Validates the response; a mismatch is a non-retryable contract error. */
  schema: S;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * Calls a JSON endpoint and validates the answer. Network failures and 5xx are retryable
 * ServiceErrors; 4xx carry the service's own error code and message.
 */
export async function callJson<S extends z.ZodType>(
  url: string,
  options: CallOptions<S>,
): Promise<z.infer<S>> {
  const timeout = AbortSignal.timeout(options.timeoutMs ?? 30_000);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  let response: Response;
  try {
    response = await fetch(url, {
      method: options.method ?? (options.body === undefined ? "GET" : "POST"),
      headers: {
        ...(options.body === undefined ? {} : { "content-type": "application/json" }),
        ...options.headers,
      },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      signal,
    });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new ServiceError(`cannot reach ${url}: ${reason}`, 503, "unreachable", true);
  }
  const text = await response.text();
  let json: unknown;
  try {
    json = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!response.ok) {
    const parsed = ErrorBody.safeParse(json);
    const message = parsed.success ? parsed.data.error.message : text.slice(0, 500) || response.statusText;
    const code = parsed.success ? parsed.data.error.code : `http_${response.status}`;
    const retryable = parsed.success ? parsed.data.error.retryable : response.status >= 500;
    throw new ServiceError(`${url}: ${response.status} ${message}`, response.status, code, retryable, json);
  }
  const result = options.schema.safeParse(json);
  if (!result.success) {
    throw new ServiceError(
      `${url}: response does not match the contract: ${result.error.message}`,
      502,
      "contract_mismatch",
      false,
      json,
    );
  }
  return result.data;
}
