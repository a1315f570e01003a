import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { repoRoot } from "@bridle/service-kit";
import { type StackConfig, vllmDtype } from "@bridle/stack";

export const composeUsage = `  compose env        the variables infra/compose/compose.yaml takes, from these settings, as
                     export lines (infra/compose/trial.sh runs the layout with them)`;

/** The Python prefix the venv was made from (pyvenv.cfg's `home` is its bin folder). */
function pythonHome(venv: string): string {
  const cfg = readFileSync(join(venv, "pyvenv.cfg"), "utf8");
  const home = /^home\s*=\s*(.+)$/m.exec(cfg)?.[1]?.trim();
  if (!home) throw new Error(`${venv}/pyvenv.cfg names no home: reinstall with ./bridle install`);
  return dirname(home);
}

/**
 * The variables compose.yaml takes, from the same settings `bridle up` reads (BRIDLE_*). The host
 * ports of the layout are the embedded stack's (BRIDLE_PORT_BASE, BRIDLE_TEMPORAL_PORT, ...), so
 * the CLI run with the same settings talks to it.
 */
export function composeEnv(config: StackConfig): Record<string, string> {
  const python = pythonHome(config.venv);
  return {
    BRIDLE_ROOT: repoRoot,
    BRIDLE_HOME: config.home,
    // Debian's own Python is in the image already; mounting the host's /usr over it would not do.
    BRIDLE_PYTHON_HOME: python === "/usr" ? join(config.home, "toolchain") : python,
    BRIDLE_MODEL_DIR: config.modelDir,
    BRIDLE_MODEL_NAME: config.modelName,
    BRIDLE_CONTEXT_WINDOW: String(config.model.contextWindow),
    BRIDLE_PRECISION: config.precision,
    BRIDLE_VLLM_DTYPE: vllmDtype(config.precision),
    BRIDLE_VLLM_KV_GIB: String(config.kvCacheGib),
    BRIDLE_VLLM_MAX_LORAS: String(config.maxLoras),
    BRIDLE_VLLM_MAX_LORA_RANK: String(config.maxLoraRank),
    BRIDLE_MAX_TOKENS: String(config.maxTokens),
    BRIDLE_VLLM_CPUS: config.vllmCpus.join(","),
    BRIDLE_VLLM_THREADS: String(config.vllmCpus.length),
    BRIDLE_API_TOKEN: config.apiToken,
    BRIDLE_GUARD_ADMIN_TOKEN: config.guardAdminToken,
    BRIDLE_GATEWAY_PORT: String(config.ports.gateway),
    BRIDLE_SERVING_PORT: String(config.ports.serving),
    BRIDLE_TASKS_PORT: String(config.ports.tasks),
    BRIDLE_TEMPORAL_PORT: String(config.ports.temporal),
    BRIDLE_TEMPORAL_UI_PORT: String(config.ports.temporalUi),
  };
}

/** `bridle compose env`: one shell `export` line per variable. */
export function composeCommand(
  config: StackConfig,
  sub: string | undefined,
  say: (line: string) => void,
): number {
  if (sub !== "env") throw new Error(`bridle compose: use 'compose env' (got '${sub ?? ""}')`);
  const quote = (v: string) => `'${v.replaceAll("'", `'\\''`)}'`;
  for (const [name, value] of Object.entries(composeEnv(config))) say(`export ${name}=${quote(value)}`);
  return 0;
}
