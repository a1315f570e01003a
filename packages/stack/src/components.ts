import { setPriority } from "node:os";
import { join } from "node:path";
import { SearchAttributes, TemporalNamespace } from "@bridle/contracts";
import { repoRoot } from "@bridle/service-kit";
import type { StackConfig } from "./config.ts";

/** How the supervisor knows a component is ready. */
export type Health =
  | { kind: "http"; url: string }
  | { kind: "tcp"; host: string; port: number }
  | { kind: "command"; command: string; args: string[] };

/** One supervised process of the embedded stack. */
export interface Component {
  name: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Ports it listens on, checked before start so a taken port is named instead of a crash loop. */
  ports: { port: number; setting: string }[];
  health: Health;
  startTimeoutMs: number;
  /** Run once after the first healthy start (namespace settings and the like). */
  afterStart?: { command: string; args: string[] }[];
  /** Its nice value, inherited by what it starts; unset: the launcher's own priority. */
  nice?: number;
}

/**
 * Sets a started component's nice value, which what it starts inherits. A machine that refuses
 * (a container without the right) keeps the component at the launcher's priority and says so.
 */
export function lowerPriority(
  pid: number,
  nice: number,
  log?: { warn: (o: object, m: string) => void },
): void {
  try {
    setPriority(pid, nice);
  } catch (err) {
    log?.warn({ err, pid, nice }, "could not lower the component's priority");
  }
}

/** Where tasks' Dockerfiles are built and their images unpacked: one place for tasks, runner and verifier. */
export const imagesHome = (config: StackConfig) => join(config.home, "containers");

/** How the Temporal CLI spells each search attribute type. */
const CLI_TYPES = { KEYWORD: "Keyword", INT: "Int", DOUBLE: "Double" } as const;

const tsEntry = (file: string) => ["--import", "tsx", join(repoRoot, file)];

/** The stack's services under `services/`, each on its own port from BRIDLE_PORT_BASE. */
type ServiceName = "serving" | "guard" | "tasks" | "verifier" | "trainer" | "gateway" | "runner";

/** The stack, in start order. Stop order is the reverse. */
export function stackComponents(config: StackConfig): Component[] {
  const { host, ports } = config;
  const temporalAddress = `${host}:${ports.temporal}`;
  const temporalBin = join(config.venv, "bin", "temporal");
  const url = (port: number) => `http://${host}:${port}`;
  /** One of Bridle's Hono services: `services/<name>/src/main.ts` on its port, healthy once /healthz answers. */
  const service = (name: ServiceName, env: Record<string, string>): Component => ({
    name,
    command: process.execPath,
    args: tsEntry(`services/${name}/src/main.ts`),
    env: { HOST: host, PORT: String(ports[name]), LOG_LEVEL: config.logLevel, ...env },
    ports: [{ port: ports[name], setting: "BRIDLE_PORT_BASE" }],
    health: { kind: "http", url: `${url(ports[name])}/healthz` },
    startTimeoutMs: 30_000,
  });
  const components: Component[] = [
    {
      name: "temporal",
      command: temporalBin,
      args: [
        "server",
        "start-dev",
        "--db-filename",
        join(config.dirs.temporal, "temporal.sqlite"),
        "--ip",
        host,
        "--port",
        String(ports.temporal),
        "--ui-port",
        String(ports.temporalUi),
        "--namespace",
        TemporalNamespace,
        ...Object.values(SearchAttributes).flatMap((a) => [
          "--search-attribute",
          `${a.name}=${CLI_TYPES[a.type]}`,
        ]),
        "--log-level",
        "warn",
      ],
      env: {},
      ports: [
        { port: ports.temporal, setting: "BRIDLE_TEMPORAL_PORT" },
        { port: ports.temporalUi, setting: "BRIDLE_TEMPORAL_UI_PORT" },
      ],
      health: {
        kind: "command",
        command: temporalBin,
        args: [
          "operator",
          "namespace",
          "describe",
          "--namespace",
          TemporalNamespace,
          "--address",
          temporalAddress,
        ],
      },
      startTimeoutMs: 60_000,
      afterStart: [
        {
          command: temporalBin,
          // Multi-day runs must outlive the dev server's 24 h default retention.
          args: [
            "operator",
            "namespace",
            "update",
            "--namespace",
            TemporalNamespace,
            "--retention",
            "720h",
            "--address",
            temporalAddress,
          ],
        },
      ],
    },
  ];
  if (config.embeddedVllm) components.push(vllmComponent(config));
  components.push(
    service("serving", {
      VLLM_URL: config.vllmNodes.join(","),
      // The model servers load each adapter from serving's files by URL, not from its disk.
      SERVING_URL: url(ports.serving),
      SERVING_DATA_DIR: join(config.data, "serving"),
      SERVING_MAX_LORAS: String(config.maxLoras),
      SERVING_MAX_LORA_RANK: String(config.maxLoraRank),
    }),
    // Harnesses call the model through the guard: it checks every tool call and captures trajectories.
    service("guard", {
      UPSTREAM_URL: config.vllmNodes.join(","),
      // Serving's registry names what served each call (serving starts before the guard).
      SERVING_URL: url(ports.serving),
      GUARD_DATA_DIR: join(config.data, "guard"),
      // Harnesses ask for up to 128K new tokens; the served model's context is far smaller.
      MAX_TOKENS_CAP: String(config.maxTokens),
      GUARD_WORKERS: String(config.guardWorkers),
      GUARD_ADMIN_TOKEN: config.guardAdminToken,
    }),
    service("tasks", {
      TASKS_DATA: join(config.data, "tasks"),
      TASK_ENV_ALLOW: config.taskEnvAllow.join(","),
      VERIFIER_TOOLCHAIN: join(config.home, "toolchain"),
      IMAGES_HOME: imagesHome(config),
      // Where `bridle harness check` stores its results; every runner reads them from here.
      HARNESS_CHECKS_DIR: join(config.data, "harness-checks"),
      ...config.artifactsS3,
    }),
    service("verifier", {
      TASKS_URL: url(ports.tasks),
      TASK_ENV_ALLOW: config.taskEnvAllow.join(","),
      VERIFIER_TOOLCHAIN: join(config.home, "toolchain"),
      IMAGES_HOME: imagesHome(config),
    }),
    service("trainer", {
      TRAINER_PYTHON: join(config.venv, "bin", "python"),
      TRAINER_MODEL_DIR: config.modelDir,
      TRAINER_DATA_DIR: join(config.data, "trainer"),
      TRAINER_PRECISION: config.precision,
    }),
    service("gateway", {
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_UI_URL: url(ports.temporalUi),
      SERVING_URL: url(ports.serving),
      TRAINER_URL: url(ports.trainer),
      BRIDLE_API_TOKEN: config.apiToken,
    }),
    // Rollouts: a harness in a sandbox whose only way out is the guard.
    service("runner", {
      TASKS_URL: url(ports.tasks),
      GUARD_URL: url(ports.guard),
      VERIFIER_URL: url(ports.verifier),
      GUARD_ADMIN_TOKEN: config.guardAdminToken,
      RUNNER_DATA_DIR: join(config.data, "runner"),
      RUNNER_URL: url(ports.runner),
      HARNESS_NPM_ROOT: join(config.home, "harnesses", "node_modules"),
      HERMES_VENV: join(config.home, "hermes-venv"),
      IMAGES_HOME: imagesHome(config),
      TASK_ENV_ALLOW: config.taskEnvAllow.join(","),
      ...config.artifactsS3,
    }),
    {
      name: "worker",
      command: process.execPath,
      args: tsEntry("workflows/src/worker.ts"),
      env: {
        TEMPORAL_ADDRESS: temporalAddress,
        SERVING_URL: url(ports.serving),
        TASKS_URL: url(ports.tasks),
        GUARD_URL: url(ports.guard),
        GUARD_ADMIN_TOKEN: config.guardAdminToken,
        RUNNER_URL: url(ports.runner),
        TRAINER_URL: url(ports.trainer),
        WORKER_DATA_DIR: join(config.data, "worker"),
        LOG_LEVEL: config.logLevel,
      },
      ports: [],
      health: {
        kind: "command",
        command: temporalBin,
        args: [
          "task-queue",
          "describe",
          "--task-queue",
          "bridle-control",
          "--namespace",
          TemporalNamespace,
          "--address",
          temporalAddress,
          "--output",
          "json",
        ],
      },
      // It bundles the workflow code first: 20-40 s on 2 busy cores.
      startTimeoutMs: 180_000,
    },
  );
  // The model server and the trainer take the cores when they need them; everything else (the
  // harnesses and tool calls the runner starts, the verifier's tests, the services) yields.
  return components.map((c) =>
    c.name === "vllm" || c.name === "trainer" || config.sideNice === 0 ? c : { ...c, nice: config.sideNice },
  );
}

/** vLLM's `--dtype` for a stack precision. */
export const vllmDtype = (precision: StackConfig["precision"]) =>
  precision === "bf16" ? "bfloat16" : "float32";

/** vLLM's CPU build serving the embedded model, with runtime LoRA loading and token ids/logprobs. */
function vllmComponent(config: StackConfig): Component {
  const lib = join(config.venv, "lib");
  const debianLib = `/usr/lib/${process.arch === "arm64" ? "aarch64" : "x86_64"}-linux-gnu`;
  return {
    name: "vllm",
    command: join(config.venv, "bin", "python"),
    args: [
      "-m",
      "vllm.entrypoints.openai.api_server",
      "--model",
      config.modelDir,
      "--served-model-name",
      config.modelName,
      "--host",
      config.host,
      "--port",
      String(config.ports.vllm),
      "--dtype",
      vllmDtype(config.precision),
      "--enforce-eager",
      "--max-model-len",
      String(config.model.contextWindow),
      "--enable-lora",
      "--max-loras",
      String(config.maxLoras),
      "--max-lora-rank",
      String(config.maxLoraRank),
      // Small models write their calls as fenced or bare JSON as often as in their own tags; the
      // plugin accepts each (for a declared tool only), the same for the base model and every adapter.
      "--enable-auto-tool-choice",
      "--tool-parser-plugin",
      join(repoRoot, "infra", "vllm", "bridle_tool_parser.py"),
      "--tool-call-parser",
      "bridle",
      ...(config.model.chatTemplate === "own"
        ? []
        : ["--chat-template", join(config.modelDir, "chat_template.jinja")]),
      "--return-tokens-as-token-ids",
      "--logprobs-mode",
      "processed_logprobs",
      // A harness re-sends its whole growing prompt on every call: the prefix cache serves it from
      // memory. Safe with adapters because every adapter version is served under a name of its own.
      "--enable-prefix-caching",
    ],
    env: {
      LD_PRELOAD: [join(debianLib, "libtcmalloc_minimal.so.4"), join(lib, "libiomp5.so")].join(":"),
      VLLM_ALLOW_RUNTIME_LORA_UPDATING: "True",
      VLLM_CPU_KVCACHE_SPACE: String(config.kvCacheGib),
      // One thread per CPU, each bound to its own (vLLM's CPU step waits for the slowest thread).
      VLLM_CPU_OMP_THREADS_BIND: config.vllmCpus.join(","),
      OMP_NUM_THREADS: String(config.vllmCpus.length),
      KMP_INIT_AT_FORK: "FALSE",
      VLLM_WORKER_MULTIPROC_METHOD: "spawn",
      TORCHDYNAMO_DISABLE: "1",
      HF_HUB_OFFLINE: "1",
      TRANSFORMERS_OFFLINE: "1",
      VLLM_NO_USAGE_STATS: "1",
      DO_NOT_TRACK: "1",
      // Where Bridle's plugin keeps the adapters it fetched from serving, one folder per content hash.
      BRIDLE_ADAPTER_CACHE: join(config.data, "vllm-adapters"),
    },
    ports: [{ port: config.ports.vllm, setting: "BRIDLE_VLLM_PORT" }],
    health: { kind: "http", url: `${config.vllmUrl}/health` },
    startTimeoutMs: 300_000,
  };
}
