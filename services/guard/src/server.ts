import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type Logger, requestIdOf, ServiceError } from "@bridle/service-kit";
import { getRequestListener } from "@hono/node-server";
import { handleProxyCall, type ProxyDeps } from "./proxy/handle.ts";
import { type Api, batchedWriter, errorOutcome } from "./proxy/http.ts";

const HOT_ROUTES: Record<string, Api> = { "/v1/chat/completions": "openai", "/v1/messages": "anthropic" };

/**
 * The guard's HTTP server. The two model-call routes go straight from `node:http` to
 * `handleProxyCall`, skipping the Fetch-API adaptor (Request/Response objects, web streams) whose
 * cost per streamed answer is several times the guard's own work; every other route (admin API,
 * `/v1/models`, `/healthz`, `/openapi.json`) is served by the Hono app.
 */
export function createGuardServer(
  app: { fetch: (request: Request) => Response | Promise<Response> },
  deps: ProxyDeps,
  log: Logger,
  bodyLimitBytes: number,
): Server {
  const fallback = getRequestListener(app.fetch);
  return createServer((req, res) => {
    const api = req.method === "POST" ? HOT_ROUTES[(req.url ?? "").split("?")[0]!] : undefined;
    if (!api) return void fallback(req, res);
    serveProxyCall(api, req, res, deps, log, bodyLimitBytes).catch((err: unknown) => {
      log.error({ err }, "proxy request failed");
      if (!res.headersSent) sendJson(res, errorOutcome(api, err));
      else res.destroy();
    });
  });
}

async function serveProxyCall(
  api: Api,
  req: IncomingMessage,
  res: ServerResponse,
  deps: ProxyDeps,
  log: Logger,
  limit: number,
): Promise<void> {
  const requestId = requestIdOf(req.headers["x-request-id"]);
  res.setHeader("x-request-id", requestId);
  const text = await readBody(req, limit);
  if (text === undefined) {
    req.resume();
    return sendJson(
      res,
      errorOutcome(
        api,
        new ServiceError(
          `Request body is larger than the limit of ${limit} bytes`,
          413,
          "payload_too_large",
          false,
        ),
      ),
    );
  }
  const header = (name: string) => {
    const value = req.headers[name.toLowerCase()];
    return Array.isArray(value) ? value[0] : value;
  };
  const outcome = await handleProxyCall(deps, log.child({ requestId }), api, header, text);
  if (!("stream" in outcome)) return sendJson(res, outcome);

  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  res.on("close", () => {
    if (!res.writableFinished) outcome.abort.abort();
  });
  const { write, take } = batchedWriter((chunk) => {
    if (!res.destroyed) res.write(chunk);
  });
  await outcome.stream(write);
  // A fast upstream's whole answer is often still pending here: headers, events and the end of the
  // response then leave in one write.
  res.end(take());
}

/** The body as text, or undefined when it is larger than `limit` bytes. */
function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limit) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners("data");
        resolve(undefined);
      } else parts.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

function sendJson(
  res: ServerResponse,
  outcome: { status: number; headers: Record<string, string>; json: unknown },
): void {
  const body = JSON.stringify(outcome.json);
  res.writeHead(outcome.status, {
    ...outcome.headers,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}

/** Listens until SIGTERM/SIGINT, then drains and closes; a taken port is reported by name. */
export function listen(
  server: Server,
  host: string,
  port: number,
  log: Logger,
  onShutdown: () => Promise<void>,
): void {
  server.keepAliveTimeout = 65_000;
  server.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EADDRINUSE") log.fatal({ port }, `port ${port} on ${host} is already in use`);
    else log.fatal({ err }, "server error");
    process.exit(1);
  });
  server.listen(port, host, () => log.info({ host, port }, "listening"));
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    server.close(() => {
      void onShutdown().finally(() => process.exit(0));
    });
    server.closeIdleConnections();
    setTimeout(() => process.exit(0), 5_000).unref();
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}
