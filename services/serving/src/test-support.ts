import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger, repoRoot } from "@bridle/service-kit";
import { loadStackConfig, stackComponents, startComponent } from "@bridle/stack";
import { AdapterManager } from "./adapters.ts";
import { createServingApp } from "./app.ts";
import { ModelPool } from "./pool.ts";
import { AdapterRegistry } from "./registry.ts";

/**
 * A serving app over a fresh registry in a temporary folder (`dir`), whose one model server is down
 * (port 1 has none): the real "model server down" path, and all that registry-only routes need.
 */
export function appWithoutModelServer(prefix: string) {
  const log = createLogger("serving", "silent");
  const pool = ModelPool.of(["http://127.0.0.1:1"], 2_000);
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const registry = new AdapterRegistry(dir);
  const limits = {
    maxLoras: 2,
    maxLoraRank: 16,
    keepVersions: 2,
    monitorMs: 60_000,
    filesDir: join(dir, "adapters"),
  };
  const app = createServingApp({ log, pool, adapters: new AdapterManager(registry, pool, limits, log) });
  return { app, registry, dir };
}

/** The install folder tests use: BRIDLE_HOME when set (a shared install), else the repo's own. */
export const bridleHome = process.env.BRIDLE_HOME ?? join(repoRoot, ".bridle");
export const python = join(bridleHome, "venv", "bin", "python");
export const modelDir = join(bridleHome, "models", "smollm2-135m-instruct");

export interface VllmProcess {
  url: string;
  modelName: string;
  /** The number format it serves in, which bounds how far two batch shapes' answers may differ. */
  precision: "bf16" | "fp32";
  stop(): Promise<void>;
}

/**
 * Starts vLLM exactly as the stack launcher does (its component definition), and waits for /health.
 * `kvGib`: its KV cache (the stack's default unless given; tests that start several keep it small).
 */
export async function startVllm(
  port: number,
  maxLoras: number,
  logDir?: string,
  kvGib?: number,
): Promise<VllmProcess> {
  const dir = logDir ?? mkdtempSync(join(tmpdir(), "bridle-vllm-"));
  const config = loadStackConfig({
    BRIDLE_MODEL: "smollm2-135m", // the adapters here are made for the smallest model
    BRIDLE_HOME: bridleHome,
    BRIDLE_DATA: dir,
    BRIDLE_VLLM_PORT: String(port),
    BRIDLE_VLLM_MAX_LORAS: String(maxLoras),
    ...(kvGib === undefined ? {} : { BRIDLE_VLLM_KV_GIB: String(kvGib) }),
  });
  const component = stackComponents(config).find((c) => c.name === "vllm");
  if (!component) throw new Error("the stack defines no vLLM component");
  const running = await startComponent(component, dir);
  return {
    url: config.vllmUrl,
    modelName: config.modelName,
    precision: config.precision,
    stop: () => running.stop("SIGKILL"),
  };
}

/** Writes real PEFT adapters for the embedded model: random (unlike the base) or zero (equal to it). */
export function makeAdapters(
  out: string,
  count: number,
  options: { zero?: boolean; seed?: number; std?: number } = {},
): string[] {
  const args = [
    "-m",
    "bridle_trainer.make_adapter",
    "--model",
    modelDir,
    "--out",
    out,
    "--count",
    String(count),
  ];
  if (options.zero) args.push("--zero");
  if (options.std !== undefined) args.push("--std", String(options.std));
  args.push("--seed", String(options.seed ?? 1));
  const cwd = join(repoRoot, "services", "trainer", "python");
  execFileSync(python, args, {
    cwd,
    env: { ...process.env, PYTHONPATH: cwd, HF_HUB_OFFLINE: "1" },
    stdio: "ignore",
  });
  return count === 1 ? [out] : Array.from({ length: count }, (_, i) => `${out}-${i}`);
}
