import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { httpOk, type RunningProcess, spawnProcess } from "@bridle/testkit";
import type { LoadTarget } from "./load.ts";

/** The bench guard's admin token (the guard does not start without one). */
const BENCH_ADMIN_TOKEN = "guard-bench-admin-token-0123456789";

/** The script's command-line arguments; pnpm passes a literal `--` through to the script. */
export const scriptArgs = () => process.argv.slice(2).filter((a) => a !== "--");

/** The benchmark's ports (see the task's port range); guards with more workers take the next ones. */
export const PORTS = {
  upstream: 19350,
  pacedUpstream: 19351,
  litellm: 19354,
  passthrough: 19355,
  pacedPassthrough: 19353,
  guard: 19356,
};

/** The answer the scripted upstream (TEST DOUBLE for the model server) streams for every request. */
export const canned = {
  text: "I will inspect the repository layout first, then read the failing test to see what the date formatter is expected to return.",
  tool_calls: [
    { name: "bash", arguments: { command: "ls -la src tests && git status --short" } },
    { name: "read", arguments: { path: "src/dates.py" } },
  ],
  chunk_chars: 6,
};

const tools = ["bash", "read"].map((name) => ({
  type: "function",
  function: { name, description: name, parameters: { type: "object", properties: {} } },
}));

/** The streamed request every load loop sends. */
export const requestBody = (model: string) =>
  JSON.stringify({
    model,
    stream: true,
    messages: [{ role: "user", content: "Fix the date formatter in src/dates.py." }],
    tools,
  });

/** The byte-pipe proxy (bench/passthrough.ts) in front of `upstreamUrl`: the floor for any Node proxy. */
export async function startPassthrough(port: number, upstreamUrl: string): Promise<BenchGuard> {
  const proc = await spawnProcess(
    process.execPath,
    [
      "--import",
      "tsx",
      fileURLToPath(new URL("./passthrough.ts", import.meta.url)),
      "--port",
      String(port),
      "--upstream",
      upstreamUrl,
    ],
    { ready: () => httpOk(`http://127.0.0.1:${port}/healthz`) },
  );
  return {
    process: proc,
    pid: proc.child.pid!,
    target: { url: `http://127.0.0.1:${port}/v1/chat/completions`, headers: {}, body: requestBody("bench") },
  };
}

/** A guard process started for the benchmark, with one registered session to send load through. */
export interface BenchGuard {
  process: RunningProcess;
  pid: number;
  target: LoadTarget;
}

/** Spawns the guard in front of `upstreamUrl` and registers a session (capture off) for the load. */
export async function startGuard(
  port: number,
  upstreamUrl: string,
  options: { nodeArgs?: string[]; workers?: number; env?: Record<string, string> } = {},
): Promise<BenchGuard> {
  const url = `http://127.0.0.1:${port}`;
  const proc = await spawnProcess(
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      "--import",
      "tsx",
      fileURLToPath(new URL("../src/main.ts", import.meta.url)),
    ],
    {
      env: {
        PORT: String(port),
        UPSTREAM_URL: upstreamUrl,
        GUARD_DATA_DIR: mkdtempSync(join(tmpdir(), "bridle-guard-bench-")),
        LOG_LEVEL: "info",
        GUARD_WORKERS: String(options.workers ?? 1),
        GUARD_ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
        ...options.env,
      },
      // Every worker listening (each logs it at info), not only the first.
      ready: async (output) =>
        (output.match(/"msg":"listening"/g)?.length ?? 0) >= (options.workers ?? 1) &&
        (await httpOk(`${url}/healthz`)),
    },
  );
  const res = await fetch(`${url}/admin/sessions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${BENCH_ADMIN_TOKEN}` },
    // Capture off: the direct baseline asks for no token ids, so neither does the guard here.
    body: JSON.stringify({
      instruction: "Fix the date formatter in src/dates.py.",
      adapter: "bench",
      capture: false,
    }),
  });
  const { apiKey } = (await res.json()) as { apiKey: string };
  return {
    process: proc,
    pid: proc.child.pid!,
    target: {
      url: `${url}/v1/chat/completions`,
      headers: { authorization: `Bearer ${apiKey}` },
      body: requestBody("bench"),
    },
  };
}
