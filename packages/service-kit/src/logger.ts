import { type Logger, pino } from "pino";

export type { Logger };

/**
 * The one way to make a logger: JSON lines, object first, errors under `err`, secrets redacted.
 * `LOG_LEVEL` is read by each service's env.ts and passed in here.
 */
export function createLogger(name: string, level = "info"): Logger {
  return pino({
    name,
    level,
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ["apiKey", "token", "*.apiKey", "*.token", "headers.authorization", "headers['x-api-key']"],
      censor: "[redacted]",
    },
  });
}
