import type { GatewayApp } from "@bridle/gateway";
import { answerJson, ServiceError } from "@bridle/service-kit";
import type { StackConfig } from "@bridle/stack";
import { type ClientResponse, hc, type parseResponse } from "hono/client";

/**
 * The gateway's API as the CLI sees it: one client typed from the gateway's own routes, so a
 * request body or a view that drifts from what the gateway declares fails the type check here.
 */
export function gatewayClient(config: StackConfig) {
  return hc<GatewayApp>(`http://${config.host}:${config.ports.gateway}`, {
    headers: { authorization: `Bearer ${config.apiToken}` },
  });
}
export type GatewayClient = ReturnType<typeof gatewayClient>;

/** What a successful answer of this call holds (its 2xx body, typed by the route). */
type Success<R extends ClientResponse<unknown>> = Awaited<ReturnType<typeof parseResponse<R>>>;

/**
 * The body of a gateway answer. An answer that is not a success becomes a `ServiceError` with the
 * gateway's code and whether retrying helps; no answer at all (down, restarting, timed out) is a
 * retryable 503, as for every call between Bridle's parts.
 */
export async function answer<R extends ClientResponse<unknown>>(
  call: (init: RequestInit) => Promise<R>,
  timeoutMs = 30_000,
): Promise<Success<R>> {
  let res: R;
  try {
    res = await call({ signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const reason =
      err instanceof Error && err.name === "TimeoutError"
        ? `no answer within ${timeoutMs} ms`
        : err instanceof Error
          ? ((err.cause as Error | undefined)?.message ?? err.message)
          : String(err);
    throw new ServiceError(`cannot reach the gateway: ${reason}`, 503, "unreachable", true);
  }
  const json = answerJson("the gateway", {
    ok: res.ok,
    status: res.status,
    statusText: res.statusText,
    text: await res.text(),
  });
  return json as Success<R>;
}
