import { serve } from "@hono/node-server";
import type { Logger } from "./logger.ts";

export interface ServeOptions {
  host: string;
  port: number;
  log: Logger;
  /** Closed after the server stops accepting requests (databases, child processes). */
  onShutdown?: () => Promise<void> | void;
}

/**
 * Serves a Hono app until SIGTERM/SIGINT, then drains and exits. A port already taken is reported
 * by name instead of a stack trace.
 */
export function serveApp(
  app: { fetch: (request: Request) => Response | Promise<Response> },
  options: ServeOptions,
): void {
  const { host, port, log } = options;
  const server = serve({ fetch: app.fetch, hostname: host, port }, () =>
    log.info({ host, port }, "listening"),
  );
  server.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EADDRINUSE") log.fatal({ port }, `port ${port} on ${host} is already in use`);
    else log.fatal({ err }, "server error");
    process.exit(1);
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    server.close(async () => {
      await options.onShutdown?.();
      process.exit(0);
    });
    setTimeout(() => process.exit(0), 5_000).unref();
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}
