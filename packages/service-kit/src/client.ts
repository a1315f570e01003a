import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { ErrorBody } from "@bridle/contracts";
import type { z } from "zod";
import { ServiceError } from "./errors.ts";

export interface CallOptions<S extends z.ZodType> {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  body?: unknown;
  headers?: Record<string, string>;
  /** Validates the response; a mismatch is a non-retryable contract error. */
  schema: S;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** Pooled connections for calls between Bridle's services. */
const agents = { http: new HttpAgent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) };

/** A response, read whole. */
interface Answer {
  ok: boolean;
  status: number;
  statusText: string;
  text: string;
}

/**
 * One HTTP exchange on `node:http`, bounded by `signal` alone. Not `fetch`: its client gives up on
 * any answer whose headers take more than 300 s (a rollout or a waited-for job often does), and a
 * caller that retries then runs the same work twice while the first copy is still going.
 */
function exchange(
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal },
): Promise<Answer> {
  const target = new URL(url);
  const https = target.protocol === "https:";
  return new Promise((resolve, reject) => {
    const req = (https ? httpsRequest : httpRequest)(
      target,
      {
        method: init.method,
        headers: {
          ...init.headers,
          ...(init.body === undefined ? {} : { "content-length": Buffer.byteLength(init.body) }),
        },
        agent: https ? agents.https : agents.http,
        signal: init.signal,
      },
      (res: IncomingMessage) => {
        const parts: Buffer[] = [];
        res.on("data", (chunk: Buffer) => parts.push(chunk));
        res.on("end", () => {
          const status = res.statusCode ?? 0;
          resolve({
            ok: status >= 200 && status < 300,
            status,
            statusText: res.statusMessage ?? "",
            text: Buffer.concat(parts).toString("utf8"),
          });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(init.body);
  });
}

/**
 * Calls a JSON endpoint and validates the answer. Network failures and 5xx are retryable
 * ServiceErrors; 4xx carry the service's own error code and message. `timeoutMs` (30 s unless
 * given) is the only limit on how long the answer may take.
 */
export async function callJson<S extends z.ZodType>(
  url: string,
  options: CallOptions<S>,
): Promise<z.infer<S>> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  let response: Answer;
  try {
    response = await exchange(url, {
      method: options.method ?? (options.body === undefined ? "GET" : "POST"),
      headers: {
        ...(options.body === undefined ? {} : { "content-type": "application/json" }),
        ...options.headers,
      },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      signal,
    });
  } catch (err) {
    const reason = timeout.aborted
      ? `no answer within ${timeoutMs} ms`
      : err instanceof Error
        ? err.message
        : String(err);
    throw new ServiceError(`cannot reach ${url}: ${reason}`, 503, "unreachable", true);
  }
  const json = answerJson(url, response);
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

/**
 * The JSON of another service's answer (undefined when empty or not JSON); an answer that is not a
 * success becomes a ServiceError with the code and retryability of its error body, named by `where`.
 */
export function answerJson(
  where: string,
  answer: { ok: boolean; status: number; statusText?: string; text: string },
): unknown {
  const { text, status } = answer;
  let json: unknown;
  try {
    json = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (answer.ok) return json;
  const parsed = ErrorBody.safeParse(json);
  const message = parsed.success ? parsed.data.error.message : text.slice(0, 500) || answer.statusText || "";
  const code = parsed.success ? parsed.data.error.code : `http_${status}`;
  const retryable = parsed.success ? parsed.data.error.retryable : status >= 500;
  throw new ServiceError(`${where}: ${status} ${message}`, status, code, retryable, json);
}
