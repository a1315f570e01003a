import { RunProgress } from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";
import { loadStackConfig, stackComponents, status } from "@bridle/stack";
import { z } from "zod";

/** The running test stack's configuration (from the env vitest.config.ts sets). */
export const config = loadStackConfig();
export const gatewayUrl = `http://${config.host}:${config.ports.gateway}`;
/** The gateway is closed without its token (the stack keeps one in its home's api-token). */
export const gatewayHeaders = { authorization: `Bearer ${config.apiToken}` };
/** The guard's admin API is closed without its token too (kept in the home's guard-admin-token). */
export const guardAdminHeaders = { authorization: `Bearer ${config.guardAdminToken}` };
export const servingUrl = `http://${config.host}:${config.ports.serving}`;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls until `check` returns a value, or fails with `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 120_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await sleep(500);
  }
  throw new Error(`timed out waiting for ${what}`);
}

export async function componentState(name: string) {
  return (await status(config)).components.find((c) => c.name === name)!;
}

/** Every component that serves HTTP of its own (the services, not Temporal or vLLM). */
export function serviceUrls(): Record<string, string> {
  return Object.fromEntries(
    stackComponents(config)
      .filter((c) => c.health.kind === "http" && c.name !== "vllm")
      .map((c) => [c.name, new URL((c.health as { url: string }).url).origin]),
  );
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: "POST",
    body: JSON.stringify(body),
    headers: {
      "content-type": "application/json",
      ...(url.startsWith(gatewayUrl) ? gatewayHeaders : {}),
      ...headers,
    },
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  // biome-ignore lint/suspicious/noExplicitAny: tests read third-party JSON (vLLM's) loosely, by design
  return { status: res.status, json: json as any };
}

/** Imports the bundled task suite into the test stack's tasks service, once per run. */
export async function ensureBundledTasks(): Promise<number> {
  const tasksUrl = `http://${config.host}:${config.ports.tasks}/v1/tasks`;
  const listed = (await (await fetch(tasksUrl)).json()) as { tasks: unknown[] };
  if (listed.tasks.length > 20) return listed.tasks.length;
  const repo = new URL("../..", import.meta.url).pathname;
  const res = await postJson(`${tasksUrl}/import`, { path: `${repo}tasks` });
  if (res.status !== 200) throw new Error(`task import failed: ${JSON.stringify(res.json)}`);
  return (res.json.verdicts as { ok: boolean }[]).filter((v) => v.ok).length;
}

/**
 * `qa-random-credit`, a fixture task whose verifier is a TEST DOUBLE for a model that sometimes
 * gets a task partly right: the small CPU model solves nothing, so on real tasks every group scores
 * alike, every step is a zero-advantage no-op and no adapter version is ever loaded. With it,
 * every step really trains and every run loads versions.
 */
export const FIXTURE = "qa-random-credit";

/** Imports the fixture tasks (test/fixtures/tasks) beside the bundled ones. */
export async function importFixtureTasks(): Promise<void> {
  const res = await postJson(`http://${config.host}:${config.ports.tasks}/v1/tasks/import`, {
    path: new URL("../fixtures/tasks", import.meta.url).pathname,
  });
  if (res.status !== 200) throw new Error(`fixture import failed: ${JSON.stringify(res.json)}`);
}

/** A training run as the gateway shows it. */
export const RunView = z.object({
  status: z.string(),
  progress: RunProgress.nullable(),
  failure: z.string().nullable(),
});
export const runView = (name: string) =>
  callJson(`${gatewayUrl}/v1/runs/${name}`, { schema: RunView, headers: gatewayHeaders });
