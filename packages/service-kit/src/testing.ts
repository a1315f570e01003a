import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import { ErrorBody } from "@bridle/contracts";

/** Test helper: the error object of a Bridle error response, validated against the contract. */
export async function errorOf(res: Response): Promise<ErrorBody["error"]> {
  return ErrorBody.parse(await res.json()).error;
}

/** Test helper: the dotted issue paths of a 400, sorted. */
export async function issuePaths(res: Response): Promise<string[]> {
  return ((await errorOf(res)).issues ?? []).map((i) => i.path).sort();
}

export interface OpenApiDoc {
  openapi: string;
  info: { title: string };
  paths: Record<string, unknown>;
}

/** Test helper: a service's OpenAPI document. */
export async function openApiOf(res: Response): Promise<OpenApiDoc> {
  return (await res.json()) as OpenApiDoc;
}

/**
 * Test helper: runs a TypeScript entry point (a service's main, the CLI) to its end in a child Node
 * with tsx, as a shell would. `env` adds to the test's environment, or with `cleanEnv` is all the
 * child has beside PATH.
 */
export function runTsx(
  file: string,
  args: string[] = [],
  options: { env?: Record<string, string>; cleanEnv?: boolean; input?: string; timeoutMs?: number } = {},
): SpawnSyncReturns<string> {
  const base = options.cleanEnv ? { PATH: process.env.PATH ?? "" } : process.env;
  return spawnSync(process.execPath, ["--import", "tsx", file, ...args], {
    env: { ...base, ...options.env },
    input: options.input,
    encoding: "utf8",
    timeout: options.timeoutMs ?? 60_000,
  });
}
