import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { httpOk, type RunningProcess, spawnProcess } from "@bridle/testkit";

/** LiteLLM refuses to start without a strong master key; this one exists only for the benchmark run. */
export const LITELLM_KEY = "sk-bridle-bench-7f3c9a1e5b2d4f6081a3c5e7";

const setupScript = join(dirname(fileURLToPath(import.meta.url)), "litellm-venv.sh");

/**
 * Starts LiteLLM's proxy as a plain pass-through: each model name to its upstream, no database,
 * no callbacks, one worker (as the guard is one process). Resolves with the process, or with the reason it cannot run here.
 */
export async function startLiteLLM(
  models: Record<string, string>,
  port: number,
): Promise<RunningProcess | { unavailable: string }> {
  const setup = spawnSync("bash", [setupScript], { encoding: "utf8", timeout: 600_000 });
  if (setup.status !== 0) {
    return {
      unavailable: `its venv could not be set up: ${(setup.stderr || setup.stdout).trim().split("\n").slice(-3).join(" ")}`,
    };
  }
  const bin = setup.stdout.trim().split("\n").at(-1)!;
  const dir = mkdtempSync(join(tmpdir(), "bridle-litellm-"));
  const config = join(dir, "config.yaml");
  writeFileSync(
    config,
    [
      "model_list:",
      ...Object.entries(models).flatMap(([name, upstreamUrl]) => [
        `  - model_name: ${name}`,
        "    litellm_params:",
        "      model: openai/scripted-model",
        `      api_base: ${upstreamUrl}/v1`,
        "      api_key: unused",
      ]),
      "general_settings:",
      `  master_key: ${LITELLM_KEY}`,
      "litellm_settings:",
      "  drop_params: true",
      "  telemetry: false",
      "",
    ].join("\n"),
  );
  try {
    return await spawnProcess(
      bin,
      ["--config", config, "--host", "127.0.0.1", "--port", String(port), "--num_workers", "1"],
      {
        env: {
          LITELLM_LOCAL_MODEL_COST_MAP: "True",
          LITELLM_LOG: "ERROR",
          LITELLM_TELEMETRY: "False",
          NO_DOCS: "True",
          DISABLE_ADMIN_UI: "True",
        },
        cwd: dir,
        ready: () => httpOk(`http://127.0.0.1:${port}/health/liveliness`),
        timeoutMs: 180_000,
      },
    );
  } catch (err) {
    return { unavailable: `it did not start: ${(err as Error).message.split("\n").slice(-4).join(" ")}` };
  }
}
