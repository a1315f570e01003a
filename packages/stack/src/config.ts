import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { BearerToken, EnvNames, loadEnv, repoRoot } from "@bridle/service-kit";
import { z } from "zod";

/** The repository root, found from this file so the CLI works from any working directory. */

const port = z.coerce.number().int().min(1).max(65_535);

/** One model of infra/models/catalog.json: where its weights come from and how it is served. */
export interface CatalogModel {
  title: string;
  dir: string;
  contextWindow: number;
  /** "own": the model's chat template (with its tool section); else a template file of infra/templates. */
  chatTemplate: string;
  note: string;
}

/** The models the bootstrap can install, by the name BRIDLE_MODEL takes. */
export const modelCatalog: Record<string, CatalogModel> = JSON.parse(
  readFileSync(join(repoRoot, "infra", "models", "catalog.json"), "utf8"),
);
export const defaultModel = "qwen2.5-coder-0.5b";
const modelNames = Object.keys(modelCatalog) as [string, ...string[]];

/** A CPU list as Linux writes it ("0-3,8,10-11"), sorted and without repeats; undefined if malformed. */
export function parseCpuList(text: string): number[] | undefined {
  const cpus = new Set<number>();
  for (const part of text.split(",")) {
    const m = /^\s*(\d{1,4})(?:-(\d{1,4}))?\s*$/.exec(part);
    if (!m) return undefined;
    const [first, last] = [Number(m[1]), Number(m[2] ?? m[1])];
    if (last < first) return undefined;
    for (let cpu = first; cpu <= last; cpu++) cpus.add(cpu);
  }
  return [...cpus].sort((a, b) => a - b);
}

/** Every setting of the embedded stack; all come from BRIDLE_* variables with safe defaults. */
export const StackEnv = z.object({
  BRIDLE_HOME: z.string().default(join(repoRoot, ".bridle")).describe("Install folder: venv, models, caches"),
  BRIDLE_DATA: z.string().optional().describe("Data folder: Temporal's SQLite file, logs, pids, adapters"),
  BRIDLE_HOST: z.string().default("127.0.0.1"),
  BRIDLE_PORT_BASE: port
    .default(8700)
    .describe("gateway, serving, tasks, guard, runner, verifier, trainer: base+0..6"),
  BRIDLE_TEMPORAL_PORT: port.default(7233),
  BRIDLE_TEMPORAL_UI_PORT: port.default(8233),
  BRIDLE_VLLM_PORT: port.default(8000),
  BRIDLE_VLLM_URL: z.string().url().optional().describe("An external vLLM server; when set, none is started"),
  BRIDLE_VLLM_NODES: z
    .string()
    .default("")
    .transform((list) =>
      list
        .split(",")
        .map((url) => url.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().url()))
    .describe(
      "More model servers beside the first (comma-separated URLs), each serving the same base model: serving loads every adapter version on each, and the guard routes each session to one that has its adapter",
    ),
  BRIDLE_MODEL: z
    .enum(modelNames, { error: () => `must be one of ${modelNames.join(", ")} (infra/models/catalog.json)` })
    .default(defaultModel)
    .describe("The embedded base model, from the catalog"),
  BRIDLE_MODEL_NAME: z
    .string()
    .min(1)
    .optional()
    .describe("Served name of the base model; default BRIDLE_MODEL"),
  BRIDLE_MODEL_DIR: z.string().optional(),
  BRIDLE_VLLM_KV_GIB: z.coerce
    .number()
    .int()
    .min(1)
    .max(1024)
    .default(2)
    .describe("vLLM's CPU KV cache, GiB"),
  BRIDLE_VLLM_CPUS: z
    .string()
    .transform((text, ctx) => {
      const cpus = parseCpuList(text);
      if (!cpus) ctx.addIssue({ code: "custom", message: "must be a CPU list like 0-7 or 0,2,4-6" });
      return cpus ?? [];
    })
    .optional()
    .describe(
      "The CPUs vLLM's CPU build runs one thread each on, as a list like 0-7 or 0,2,4-6; default: one CPU per physical core this process may use",
    ),
  BRIDLE_SIDE_NICE: z.coerce
    .number()
    .int()
    .min(0)
    .max(19)
    .default(10)
    .describe(
      "Scheduling priority (nice) of every component beside the model server and the trainer, and of what they start",
    ),
  BRIDLE_PRECISION: z
    .enum(["auto", "bf16", "fp32"])
    .default("auto")
    .describe(
      "Serving and training number format; auto: bf16 where the CPU has bf16 matmul units (AMX, AVX512-BF16), else fp32",
    ),
  BRIDLE_VLLM_MAX_LORAS: z.coerce.number().int().min(1).max(64).default(4),
  BRIDLE_VLLM_MAX_LORA_RANK: z.coerce
    .number()
    .int()
    .refine((r) => [8, 16, 32, 64, 128, 256].includes(r), {
      message: "must be one of 8, 16, 32, 64, 128, 256",
    })
    .default(16),
  BRIDLE_MAX_TOKENS: z.coerce
    .number()
    .int()
    .min(16)
    .max(1_000_000)
    .default(512)
    .describe("Cap on new tokens per model call"),
  BRIDLE_IMAGE_CACHE_GB: z.coerce
    .number()
    .positive()
    .default(40)
    .describe(
      "GiB that task images unpacked in <BRIDLE_HOME>/containers may take together (read by the tasks service, runners and verifiers); past it, the images used longest ago go, never one a sandbox runs on",
    ),
  BRIDLE_TASK_ENV_ALLOW: EnvNames.describe(
    "Variables of your environment that the $VAR references of tasks' task.toml [verifier] env may read, comma-separated; none by default",
  ),
  BRIDLE_ARTIFACTS_S3_URL: z
    .string()
    .url()
    .optional()
    .describe(
      "An S3-compatible bucket (path style) for the artifacts the runner and tasks service hand out, with the three settings below; unset: they serve them",
    ),
  BRIDLE_ARTIFACTS_S3_REGION: z.string().min(1).optional(),
  BRIDLE_ARTIFACTS_S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  BRIDLE_ARTIFACTS_S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  BRIDLE_GUARD_WORKERS: z.coerce
    .number()
    .int()
    .min(1)
    .max(64)
    .default(1)
    .describe("Guard processes on its one port; more beside a GPU server running hundreds of rollouts"),
  BRIDLE_API_TOKEN: BearerToken("")
    .optional()
    .describe(
      "The gateway's bearer token; unset: the one kept in <BRIDLE_HOME>/api-token, made on first use",
    ),
  BRIDLE_GUARD_ADMIN_TOKEN: BearerToken("")
    .optional()
    .describe(
      "The guard's admin token (sessions, trajectories); unset: the one kept in <BRIDLE_HOME>/guard-admin-token",
    ),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});
export type StackEnv = z.infer<typeof StackEnv>;

export interface StackConfig {
  home: string;
  data: string;
  host: string;
  venv: string;
  modelDir: string;
  modelName: string;
  model: CatalogModel & { key: string };
  kvCacheGib: number;
  /** The CPUs vLLM's CPU build binds its threads to, one each (BRIDLE_VLLM_CPUS, else one per core). */
  vllmCpus: number[];
  /**
   * Nice value of the components beside the model server and the trainer (BRIDLE_SIDE_NICE): vLLM's
   * CPU step runs one thread per core and waits for the slowest, so work that preempts one of them
   * holds every stream.
   */
  sideNice: number;
  /** The number format vLLM serves in and the trainer's matmuls use (BRIDLE_PRECISION resolved). */
  precision: "bf16" | "fp32";
  ports: {
    gateway: number;
    serving: number;
    tasks: number;
    guard: number;
    runner: number;
    verifier: number;
    trainer: number;
    temporal: number;
    temporalUi: number;
    vllm: number;
  };
  vllmUrl: string;
  /** Every model server serving and the guard use: the first (vllmUrl), then BRIDLE_VLLM_NODES. */
  vllmNodes: string[];
  /** False when BRIDLE_VLLM_URL points at a model server someone else runs. */
  embeddedVllm: boolean;
  maxLoras: number;
  maxLoraRank: number;
  maxTokens: number;
  guardWorkers: number;
  /** The ARTIFACTS_S3_* settings of the services that hand out artifacts (empty: none). */
  artifactsS3: Record<string, string>;
  /** Variables of the user's environment that tasks' `${VAR}` references may read. */
  taskEnvAllow: string[];
  /** The gateway's bearer token: its API is closed without it, always. */
  apiToken: string;
  /** Where the token comes from, for people: its file, or the BRIDLE_API_TOKEN setting. */
  apiTokenSource: string;
  /**
   * The guard's admin token: its /admin routes (register a session, read a trajectory) are closed
   * without it, always, since every sandbox reaches the guard's port. The runner and the worker hold it.
   */
  guardAdminToken: string;
  logLevel: string;
  dirs: { logs: string; run: string; temporal: string };
  /** The settings it was loaded from (BRIDLE_* and LOG_LEVEL): the supervisor is started with these. */
  settings: Record<string, string>;
}

export function loadStackConfig(source: Record<string, string | undefined> = process.env): StackConfig {
  const env = loadEnv("bridle", StackEnv, source);
  if (env.BRIDLE_VLLM_CPUS) {
    const allowed = new Set(allowedCpus());
    const outside = env.BRIDLE_VLLM_CPUS.filter((cpu) => !allowed.has(cpu));
    if (outside.length > 0) {
      throw new Error(
        `bridle: BRIDLE_VLLM_CPUS names CPUs this process may not run on: ${outside.join(",")} (it may use ${[...allowed].join(",")})`,
      );
    }
  }
  const home = resolve(env.BRIDLE_HOME);
  const data = resolve(env.BRIDLE_DATA ?? join(home, "data"));
  const base = env.BRIDLE_PORT_BASE;
  const model = modelCatalog[env.BRIDLE_MODEL]!;
  const vllmUrl = env.BRIDLE_VLLM_URL ?? `http://${env.BRIDLE_HOST}:${env.BRIDLE_VLLM_PORT}`;
  return {
    home,
    data,
    host: env.BRIDLE_HOST,
    venv: join(home, "venv"),
    modelDir: resolve(env.BRIDLE_MODEL_DIR ?? join(home, "models", model.dir)),
    modelName: env.BRIDLE_MODEL_NAME ?? env.BRIDLE_MODEL,
    model: { ...model, key: env.BRIDLE_MODEL },
    kvCacheGib: env.BRIDLE_VLLM_KV_GIB,
    vllmCpus: env.BRIDLE_VLLM_CPUS ?? oneCpuPerCore(allowedCpus()),
    sideNice: env.BRIDLE_SIDE_NICE,
    precision: env.BRIDLE_PRECISION === "auto" ? autoPrecision() : env.BRIDLE_PRECISION,
    ports: {
      gateway: base,
      serving: base + 1,
      tasks: base + 2,
      guard: base + 3,
      runner: base + 4,
      verifier: base + 5,
      trainer: base + 6,
      temporal: env.BRIDLE_TEMPORAL_PORT,
      temporalUi: env.BRIDLE_TEMPORAL_UI_PORT,
      vllm: env.BRIDLE_VLLM_PORT,
    },
    vllmUrl,
    vllmNodes: [vllmUrl, ...env.BRIDLE_VLLM_NODES.filter((node) => node !== vllmUrl)],
    embeddedVllm: env.BRIDLE_VLLM_URL === undefined,
    maxLoras: env.BRIDLE_VLLM_MAX_LORAS,
    maxLoraRank: env.BRIDLE_VLLM_MAX_LORA_RANK,
    maxTokens: env.BRIDLE_MAX_TOKENS,
    guardWorkers: env.BRIDLE_GUARD_WORKERS,
    artifactsS3: Object.fromEntries(
      (["URL", "REGION", "ACCESS_KEY_ID", "SECRET_ACCESS_KEY"] as const).flatMap((k) => {
        const value = env[`BRIDLE_ARTIFACTS_S3_${k}`];
        return value ? [[`ARTIFACTS_S3_${k}`, value]] : [];
      }),
    ),
    taskEnvAllow: env.BRIDLE_TASK_ENV_ALLOW,
    apiToken: env.BRIDLE_API_TOKEN ?? localApiToken(home),
    apiTokenSource: env.BRIDLE_API_TOKEN ? "the BRIDLE_API_TOKEN setting" : join(home, "api-token"),
    guardAdminToken: env.BRIDLE_GUARD_ADMIN_TOKEN ?? localApiToken(home, "guard-admin-token"),
    logLevel: env.LOG_LEVEL,
    dirs: { logs: join(data, "logs"), run: join(data, "run"), temporal: join(data, "temporal") },
    settings: Object.fromEntries(
      Object.entries(source).filter(
        (e): e is [string, string] =>
          (e[0].startsWith("BRIDLE_") || e[0] === "LOG_LEVEL") && e[1] !== undefined,
      ),
    ),
  };
}

/**
 * A token kept in `<home>/<file>` (the gateway's `api-token`, the guard's `guard-admin-token`),
 * readable by its owner alone; made (32 random bytes) the first time anything of the stack asks for
 * it, so neither API is ever open and the CLI on the same machine always holds the key.
 */
export function localApiToken(home: string, file = "api-token"): string {
  const path = join(home, file);
  if (!existsSync(path)) {
    mkdirSync(home, { recursive: true });
    try {
      writeFileSync(path, `${randomBytes(32).toString("base64url")}\n`, { mode: 0o600, flag: "wx" });
    } catch (err) {
      // Another process of the stack made it first: read theirs.
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
  if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
  const token = readFileSync(path, "utf8").trim();
  if (token.length < 16) throw new Error(`${path}: the API token must have at least 16 characters`);
  return token;
}

/** Whether the bootstrap has installed what the stack runs on. */
export function missingInstall(config: StackConfig): string[] {
  const missing: string[] = [];
  if (!existsSync(join(config.venv, "bin", "temporal")))
    missing.push(`the Temporal CLI (${config.venv}/bin/temporal)`);
  if (config.embeddedVllm && !existsSync(join(config.modelDir, "config.json"))) {
    missing.push(`the embedded model (${config.modelDir})`);
  }
  return missing;
}

/** The CPUs this process may run on (its affinity, as /proc reports it), else 0..N-1. */
export function allowedCpus(status = readProcFile("/proc/self/status")): number[] {
  const listed = /^Cpus_allowed_list:\s*(\S+)$/m.exec(status)?.[1];
  if (listed) {
    const cpus = parseCpuList(listed);
    if (cpus) return cpus;
  }
  return Array.from({ length: availableParallelism() }, (_, i) => i);
}

/**
 * One CPU per physical core of `cpus` (the first of each core's hyperthreads there): vLLM's CPU
 * step is bound by memory bandwidth and waits for its slowest thread, so two threads on one core
 * only contend. `siblings(cpu)` is the kernel's thread_siblings_list of that CPU; where it cannot
 * be read, every CPU counts as a core of its own.
 */
export function oneCpuPerCore(
  cpus: number[],
  siblings: (cpu: number) => string = (cpu) =>
    readProcFile(`/sys/devices/system/cpu/cpu${cpu}/topology/thread_siblings_list`).trim(),
): number[] {
  const taken = new Set<number>();
  const chosen: number[] = [];
  for (const cpu of cpus) {
    if (taken.has(cpu)) continue;
    chosen.push(cpu);
    for (const sibling of parseCpuList(siblings(cpu)) ?? []) taken.add(sibling);
  }
  return chosen;
}

/**
 * bf16 where the CPU multiplies bf16 natively (AMX tiles or AVX512-BF16): there it is the faster
 * format for both serving and training. Elsewhere (AVX2-only hosts) vLLM and torch fall back to slow
 * bf16 kernels, and fp32 is several times faster, so fp32 is the default there.
 */
export function autoPrecision(cpuinfo = readProcFile("/proc/cpuinfo")): "bf16" | "fp32" {
  const flags = new Set(/^flags\s*:(.*)$/m.exec(cpuinfo)?.[1]?.trim().split(/\s+/) ?? []);
  return flags.has("amx_bf16") || flags.has("avx512_bf16") ? "bf16" : "fp32";
}

function readProcFile(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
