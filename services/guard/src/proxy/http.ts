import type { Session } from "@bridle/contracts";
import type { Context } from "hono";
import type { CaptureStore } from "../capture.ts";
import { UpstreamError } from "./upstream.ts";

/** An error to render in the calling API's own error format. */
export class ProxyError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryable = false,
  ) {
    super(message);
  }
}

export type Api = "openai" | "anthropic";

/** The session named by the API key the harness sent (`Authorization: Bearer` or `x-api-key`). */
export function sessionOf(c: Context, store: CaptureStore): Session {
  const bearer = /^Bearer\s+(.+)$/i.exec(c.req.header("authorization") ?? "")?.[1];
  const key = bearer ?? c.req.header("x-api-key");
  if (!key) {
    throw new ProxyError(
      401,
      "missing_api_key",
      "No API key: send the session key as `Authorization: Bearer <key>` or `x-api-key`",
    );
  }
  const session = store.sessionByKey(key.trim());
  if (!session) {
    throw new ProxyError(
      401,
      "unknown_session",
      "Unknown API key: no guard session is registered for it (POST /admin/sessions first)",
    );
  }
  return session;
}

/** Reads the body as JSON; malformed JSON or a non-object is a 400 that says what is wrong. */
export async function jsonBody(c: Context): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new ProxyError(
      400,
      "invalid_json",
      `The request body is not valid JSON: ${(err as Error).message}`,
    );
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ProxyError(400, "invalid_request", "The request body must be a JSON object");
  }
  return body as Record<string, unknown>;
}

/** Renders any failure in the API's error shape; upstream outages are retryable 502/503. */
export function errorResponse(api: Api, err: unknown): Response {
  const e =
    err instanceof ProxyError
      ? err
      : err instanceof UpstreamError
        ? new ProxyError(err.status, err.code, err.message, err.retryable)
        : new ProxyError(500, "internal", "Internal error in the guard; see its log", true);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (e.retryable) headers["retry-after"] = "1";
  const body =
    api === "openai"
      ? { error: { message: e.message, type: e.code, code: e.code, retryable: e.retryable } }
      : { type: "error", error: { type: anthropicType(e.status), message: e.message } };
  return new Response(JSON.stringify(body), { status: e.status, headers });
}

function anthropicType(status: number): string {
  if (status === 400) return "invalid_request_error";
  if (status === 401) return "authentication_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 503) return "overloaded_error";
  return "api_error";
}

/**
 * A server-sent-events response fed by `run`. The harness closing the connection aborts the
 * upstream call through `abort`.
 */
export function sseResponse(
  abort: AbortController,
  run: (write: (text: string) => void) => Promise<void>,
): Response {
  const encoder = new TextEncoder();
  let closed = false;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (text: string) => {
        if (!closed) controller.enqueue(encoder.encode(text));
      };
      const close = () => {
        if (!closed) {
          closed = true;
          controller.close();
        }
      };
      // run() records its own failures (capture, error event); closing is all that is left here.
      run(write).then(close, close);
    },
    cancel() {
      closed = true;
      abort.abort();
    },
  });
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
    },
  });
}
