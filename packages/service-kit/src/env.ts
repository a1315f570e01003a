import { z } from "zod";

/** A TCP port setting; a service's env.ts gives its own default (`PORT: Port.default(8701)`). */
export const Port = z.coerce.number().int().min(1).max(65_535);

/** Settings every service has. Each service's env.ts extends this. */
export const BaseEnv = z.object({
  HOST: z.string().default("127.0.0.1"),
  PORT: Port,
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(8 * 1024 * 1024),
});

/** The fewest characters a bearer token may have. */
export const MIN_TOKEN_LENGTH = 16;

/**
 * A bearer token a component requires: the control plane is closed by default, so without one it
 * does not start, and says what `closes`.
 */
export const BearerToken = (closes: string) =>
  z
    .string({ error: `required: ${closes}` })
    .min(MIN_TOKEN_LENGTH, `use at least ${MIN_TOKEN_LENGTH} characters`);

/**
 * A comma-separated list of environment variable names, such as the variables a task's `${VAR}`
 * references may read (`TASK_ENV_ALLOW`): empty by default, so tasks read none.
 */
export const EnvNames = z
  .string()
  .default("")
  .transform((s) =>
    s
      .split(",")
      .map((n) => n.trim())
      .filter((n) => n !== ""),
  )
  .pipe(z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "a variable name such as OPENAI_API_KEY")));

/** One URL or several, comma-separated (a pool of model servers): at least one, each a URL. */
export const UrlList = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((list) => list.split(",").map((url) => url.trim()))
    .pipe(z.array(z.string().url()).min(1));

/**
 * A service's own address as others reach it: the setting when given, else its host and port (a
 * wildcard bind is reached at the loopback address).
 */
export function ownUrl(setting: string | undefined, host: string, port: number): string {
  if (setting) return setting;
  const reach = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  return `http://${reach.includes(":") ? `[${reach}]` : reach}:${port}`;
}

/** Thrown when the environment does not satisfy a service's schema; names every bad variable. */
export class EnvError extends Error {
  constructor(
    readonly service: string,
    readonly problems: string[],
  ) {
    super(`${service}: invalid settings:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "EnvError";
  }
}

/**
 * Validates the environment against a schema. Call it once, from the service's env.ts; nothing
 * else reads process.env. A bad setting raises an EnvError naming the variable.
 */
export function loadEnv<S extends z.ZodType>(
  service: string,
  schema: S,
  source: Record<string, string | undefined> = process.env,
): z.infer<S> {
  const parsed = schema.safeParse(source);
  if (parsed.success) return parsed.data;
  throw new EnvError(
    service,
    parsed.error.issues.map((issue) => {
      const name = issue.path.join(".") || "(environment)";
      const value = typeof issue.path[0] === "string" ? source[issue.path[0]] : undefined;
      return `${name}: ${issue.message}${value === undefined ? " (not set)" : ` (got ${JSON.stringify(value)})`}`;
    }),
  );
}

/** Runs a service's settings loader; on bad settings prints the named problems and exits 1. */
export function orExit<T>(load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (err instanceof EnvError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
