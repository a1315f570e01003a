import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { SessionCreated, SessionRegistration } from "@bridle/contracts";
import { httpOk, type RunningProcess, spawnProcess, spawnScriptedUpstream } from "@bridle/testkit";

const guardMain = fileURLToPath(new URL("./main.ts", import.meta.url));

/** The admin token of the guards the tests start (the guard does not start without one). */
export const TEST_ADMIN_TOKEN = "guard-test-admin-token-0123456789";
export const adminHeaders = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

/** A guard process in front of a scripted upstream process (the TEST DOUBLE for vLLM). */
export interface GuardHarness {
  guardUrl: string;
  upstreamUrl: string;
  dataDir: string;
  /** The guard's process id (the primary, with GUARD_WORKERS > 1). */
  pid: number;
  /** What the guard has logged so far (its last 20,000 characters). */
  output(): string;
  setScript(turns: unknown[]): Promise<void>;
  /** A GET of the admin API (`/admin/...`), with the admin token. */
  admin(path: string): Promise<Response>;
  upstreamRequests(): Promise<Record<string, unknown>[]>;
  register(input: Partial<SessionRegistration> & { instruction: string }): Promise<SessionCreated>;
  stop(): Promise<void>;
}

/** Starts both as real processes; the guard on `port` (from the package's range 19300-19399). */
export async function startGuard(
  port: number,
  env: Record<string, string> = {},
  options: {
    upstreamUrl?: string;
    dataDir?: string;
    /** Ready also needs this of the guard's output (healthz answering is always needed). */
    ready?: (output: string) => boolean;
  } = {},
): Promise<GuardHarness> {
  const upstream = options.upstreamUrl ? undefined : await spawnScriptedUpstream([{ text: "ready" }]);
  const upstreamUrl = options.upstreamUrl ?? upstream!.url;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "bridle-guard-test-"));
  const guardUrl = `http://127.0.0.1:${port}`;
  let guard: RunningProcess;
  try {
    guard = await spawnProcess(process.execPath, ["--import", "tsx", guardMain], {
      env: {
        PORT: String(port),
        UPSTREAM_URL: upstreamUrl,
        GUARD_DATA_DIR: dataDir,
        GUARD_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
        LOG_LEVEL: "warn",
        ...env,
      },
      ready: async (output) => (options.ready?.(output) ?? true) && (await httpOk(`${guardUrl}/healthz`)),
    });
  } catch (err) {
    await upstream?.stop();
    throw err;
  }
  return {
    guardUrl,
    upstreamUrl,
    dataDir,
    pid: guard.child.pid!,
    output: () => guard.output(),
    async setScript(turns) {
      const res = await fetch(`${upstreamUrl}/_scripted/script`, {
        method: "PUT",
        body: JSON.stringify(turns),
      });
      if (!res.ok) throw new Error(`script rejected: ${await res.text()}`);
    },
    async upstreamRequests() {
      return (await (await fetch(`${upstreamUrl}/_scripted/requests`)).json()) as Record<string, unknown>[];
    },
    admin: (path) => fetch(`${guardUrl}${path}`, { headers: adminHeaders }),
    async register(input) {
      const res = await fetch(`${guardUrl}/admin/sessions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...adminHeaders },
        body: JSON.stringify({ adapter: "smoke-adapter@1", ...input }),
      });
      if (res.status !== 201) throw new Error(`register failed: ${res.status} ${await res.text()}`);
      return (await res.json()) as SessionCreated;
    },
    async stop() {
      await guard.stop();
      await upstream?.stop();
    },
  };
}

/** The declared tools of a pi-like harness, in OpenAI form. */
export const openaiTools = ["bash", "read", "write", "edit"].map((name) => ({
  type: "function" as const,
  function: {
    name,
    description: `the ${name} tool`,
    parameters: { type: "object", properties: { command: { type: "string" }, path: { type: "string" } } },
  },
}));

/** The same tools in Anthropic form. */
export const anthropicTools = ["Bash", "Read", "Write", "Edit"].map((name) => ({
  name,
  description: `the ${name} tool`,
  input_schema: {
    type: "object" as const,
    properties: { command: { type: "string" }, file_path: { type: "string" } },
  },
}));
