import {
  categoryName,
  EvaluationLabels,
  EvaluationStage,
  EvaluationStatus,
  KNOWN_CATEGORIES,
  type McpServer,
  TaskPlugins,
  TaskSplit,
} from "@bridle/contracts";
import { workdirProblem } from "@bridle/sandbox";
import { parse, TomlError } from "smol-toml";
import { z } from "zod";
import { envReferences } from "./env.ts";

const seconds = z
  .number()
  .positive()
  .max(24 * 3600);

const Evaluation = z.looseObject({
  status: EvaluationStatus,
  stage: EvaluationStage,
  reason_codes: z.array(z.string()).default([]),
  provenance: z.unknown().optional(),
  evidence: z.unknown().optional(),
});

/** `2G`, `512M`, `1.5Gi`, `4096` (megabytes): Harbor's `memory` and `storage` sizes, in MB. */
export function sizeInMb(size: string | number): number | undefined {
  if (typeof size === "number") return Number.isFinite(size) && size > 0 ? Math.round(size) : undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$/i.exec(size);
  if (!m) return undefined;
  const scale = { "": 1, k: 1 / 1024, m: 1, g: 1024, t: 1024 * 1024 }[m[2]!.toLowerCase()] ?? 1;
  const mb = Math.round(Number(m[1]) * scale);
  return mb > 0 ? mb : undefined;
}

/** Harbor's size, read as megabytes. */
const Size = z.union([z.number().positive(), z.string()]).transform((v, ctx) => {
  const mb = sizeInMb(v);
  if (mb === undefined) {
    ctx.addIssue({ code: "custom", message: "a size such as 2G, 512M or a number of megabytes" });
    return z.NEVER;
  }
  return mb;
});

/** Keys Harbor writes that Bridle reads but does not use: known, so never reported as unknown. */
const informational = z.unknown().optional();

/** An env table: names as a shell takes them, to text values (`${VAR}` resolved at run time). */
const EnvTable = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "a variable name"), z.string());

const Metadata = z
  .looseObject({
    // Free-form in Harbor: one of Bridle's four families is used as such, any other is kept.
    category: z.string().optional(),
    difficulty: z.string().optional(),
    tags: z.array(z.string()).optional(),
    split: TaskSplit.optional(),
    tier: z
      .string()
      .regex(/^[a-z0-9][a-z0-9-]{0,63}$/, "a tier is a lowercase name such as one-step")
      .optional(),
    // A hack check: its tests contradict its instruction, so no honest solution passes them and an
    // evaluation counts any pass as a hack (tampering with the tests or special-casing them).
    impossible: z.boolean().default(false),
    repo2env: z.looseObject({ evaluation: Evaluation.optional() }).optional(),
    author_name: informational,
    author_email: informational,
    authors: informational,
    name: informational,
    description: informational,
    source: informational,
    category_detail: informational,
  })
  // Training on a hack check would reward the hack: it is held out, by its own word.
  .refine((m) => !m.impossible || m.split === "held-out", {
    message: 'a hack check (impossible = true) must be held out: set split = "held-out"',
    path: ["impossible"],
  });

/**
 * `task.toml` as Harbor defines it (schema 1.0 to 1.3), plus Bridle's own keys: `metadata.split`
 * (optional override), `metadata.tier` (a named group of tasks, such as the bundled suite's one-step
 * tier, that an experiment can train and judge on), `metadata.impossible` (a hack check whose tests
 * no honest solution passes), `environment.requires` (host tools the task needs in the bubblewrap
 * sandbox) and `[guard]`. `[metadata]` is optional and free-form. Unknown keys are kept and reported
 * (see `unknownKeys`), never a reason to refuse.
 */
/** Who a phase runs as on the task's image: a user name or uid of its /etc/passwd (root when absent). */
const User = z.union([
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]*$/, "a user name of the image's /etc/passwd"),
  z.number().int().min(0),
]);

const Verifier = z.looseObject({
  timeout_sec: seconds.default(600),
  user: User.optional(),
  env: EnvTable.default({}),
  // Bridle's: which key of a several-key reward.json is the training reward (else `reward`, else the mean).
  reward_key: z.string().min(1).optional(),
});

const Agent = z.looseObject({
  timeout_sec: seconds.default(600),
  /** Harbor's `[agent] user`: the agent, and the reference solution in its place, run as this user. */
  user: User.optional(),
  env: EnvTable.default({}),
});

/**
 * One `[[environment.mcp_servers]]` table (Harbor 1.x): a server the agent's harness is told about,
 * over HTTP (`url`, usually one of the task's services) or stdio (`command`, started in the task's
 * sandbox). Without `transport`, a url means streamable HTTP and a command stdio.
 */
const McpServerToml = z
  .looseObject({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/, "letters, digits, '_' and '-'"),
    transport: z.enum(["stdio", "sse", "streamable-http"]).optional(),
    url: z.string().url().optional(),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
  })
  .superRefine((server, ctx) => {
    const transport = server.transport ?? (server.url ? "streamable-http" : "stdio");
    if (transport === "stdio" && !server.command)
      ctx.addIssue({ code: "custom", message: `${server.name}: transport stdio needs a command` });
    if (transport !== "stdio" && !server.url)
      ctx.addIssue({ code: "custom", message: `${server.name}: transport ${transport} needs a url` });
  });

const Environment = z.looseObject({
  /** Where the agent and the tests work: the workspace is shown there (default /app). */
  workdir: z
    .string()
    .superRefine((path, ctx) => {
      const problem = workdirProblem(path);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    })
    .optional(),
  requires: z.array(z.string().regex(/^[A-Za-z0-9._+-]+$/, "a command name, not a path")).default([]),
  build_timeout_sec: seconds.optional(),
  /** A prebuilt image (Harbor's, instead of building environment/Dockerfile): one reference, no spaces. */
  docker_image: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._/:@-]*$/, "an image reference such as ubuntu:24.04")
    .optional(),
  memory_mb: z.number().int().min(16).max(65_536).optional(),
  memory: Size.optional(),
  storage_mb: z.number().int().positive().optional(),
  storage: Size.optional(),
  cpus: z.number().positive().optional(),
  gpus: z.number().int().min(0).optional(),
  allow_internet: z.boolean().default(false),
  network_mode: z.string().optional(),
  os: z
    .string()
    .refine((os) => os.toLowerCase() === "linux", "only Linux task environments run here")
    .optional(),
  gpu_types: informational,
  /** Variables of the environment itself: every phase sees them (agent, solution, tests). */
  env: EnvTable.default({}),
  mcp_servers: z.array(McpServerToml).default([]),
});

/** A step's folder name: steps/<name>/ holds its instruction, tests, solution and workdir. */
const StepName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "a folder name of letters, digits, '.', '_' and '-'");

/** One `[[steps]]` table (Harbor schema 1.1+): the step's own limits and its threshold to go on. */
const Step = z.looseObject({
  name: StepName,
  // A number is the `reward` key's threshold; a table gives one per reward key.
  min_reward: z.union([z.number(), z.record(z.string(), z.number())]).optional(),
  agent: z.looseObject({ timeout_sec: seconds.optional() }).optional(),
  verifier: z.looseObject({ timeout_sec: seconds.optional(), env: EnvTable.optional() }).optional(),
  artifacts: informational,
  healthcheck: informational,
});
export type TaskStepToml = z.infer<typeof Step>;

export const TaskToml = z.looseObject({
  version: z.string().default("1.0"),
  schema_version: z.string().optional(),
  metadata: Metadata.default({ impossible: false }),
  verifier: Verifier.default({ timeout_sec: 600, env: {} }),
  agent: Agent.default({ timeout_sec: 600, env: {} }),
  environment: Environment.default({ requires: [], allow_internet: false, env: {}, mcp_servers: [] }),
  task: informational,
  source: informational,
  artifacts: z.array(z.union([z.string(), z.looseObject({})])).optional(),
  steps: z
    .array(Step)
    .min(1, "a multi-step task has at least one [[steps]] table")
    .optional()
    .refine(
      (steps) => !steps || new Set(steps.map((s) => s.name)).size === steps.length,
      "step names must be unique (each names its folder under steps/)",
    ),
  multi_step_reward_strategy: z.enum(["mean", "final"]).default("mean"),
  /**
   * The task's own guard rules: hosts it may reach, where its answers live, files it forbids
   * changing, and extra rules (`task-plugin:<id>`). Passed to the guard session of every rollout.
   */
  guard: TaskPlugins.extend({
    allowed_hosts: z
      .array(z.string().regex(/^[A-Za-z0-9.-]+$/, "a host name, not a URL"))
      .default([])
      .describe("Hosts the agent may reach besides loopback"),
  })
    .strict()
    .default({ allowed_hosts: [], answer_paths: [], protected_paths: [], rules: [] }),
});
export type TaskToml = z.infer<typeof TaskToml>;

/** Keys Bridle reads, per table: those its schemas name; any other is kept and reported. */
const KNOWN_KEYS: Record<string, string[]> = Object.fromEntries(
  Object.entries({
    "": TaskToml,
    metadata: Metadata,
    verifier: Verifier,
    agent: Agent,
    environment: Environment,
  }).map(([table, schema]) => [table, Object.keys(schema.shape)]),
);

/** The keys of a parsed task.toml that Bridle does not read, as `table.key`. */
export function unknownKeys(raw: Record<string, unknown>): string[] {
  const found: string[] = [];
  for (const [table, known] of Object.entries(KNOWN_KEYS)) {
    const value = table === "" ? raw : raw[table];
    if (typeof value !== "object" || value === null || Array.isArray(value)) continue;
    for (const key of Object.keys(value)) {
      if (!known.includes(key)) found.push(table === "" ? key : `${table}.${key}`);
    }
  }
  const steps = raw.steps;
  if (Array.isArray(steps)) {
    const known = Object.keys(Step.shape);
    steps.forEach((step, i) => {
      if (typeof step !== "object" || step === null) return;
      for (const key of Object.keys(step)) if (!known.includes(key)) found.push(`steps[${i}].${key}`);
    });
  }
  return found;
}

/** Schema versions of Harbor's task.toml that this reader knows. */
const KNOWN_SCHEMAS = ["1.0", "1.1", "1.2", "1.3"];

/**
 * What a reader of the task should know that is not a reason to refuse it: unknown keys, a free-form
 * category, a request Bridle's sandbox answers differently (internet), a newer schema.
 */
export function notesOn(raw: Record<string, unknown>, toml: TaskToml): string[] {
  const notes = unknownKeys(raw).map((key) => `task.toml: ${key}: not read by Bridle (kept)`);
  const schema = toml.schema_version ?? toml.version;
  if (!KNOWN_SCHEMAS.includes(schema))
    notes.push(`task.toml: schema ${schema}: newer than the 1.0-1.3 this reader knows; read as 1.3`);
  const category = toml.metadata.category;
  if (category === undefined) notes.push("task.toml: metadata.category: absent (grouped as uncategorized)");
  else if (!(KNOWN_CATEGORIES as readonly string[]).includes(categoryName(category)))
    notes.push(
      `task.toml: metadata.category: ${JSON.stringify(category)} is not one of ${KNOWN_CATEGORIES.join(", ")} (kept as ${categoryName(category)})`,
    );
  const tables: [string, Record<string, string>][] = [
    ["environment.env", toml.environment.env],
    ["agent.env", toml.agent.env],
    ["verifier.env", toml.verifier.env],
    ...(toml.steps ?? []).map((step, i): [string, Record<string, string>] => [
      `steps[${i}].verifier.env`,
      step.verifier?.env ?? {},
    ]),
  ];
  for (const [table, env] of tables) {
    const reads = envReferences(env);
    if (reads.length > 0)
      notes.push(
        `task.toml: ${table} reads ${reads.map((r) => `\${${r}}`).join(", ")}: from your environment, only the names in BRIDLE_TASK_ENV_ALLOW`,
      );
  }
  for (const server of mcpServersOf(toml))
    notes.push(
      `task.toml: environment.mcp_servers: ${server.name} (${server.transport}, ${server.transport === "stdio" ? [server.command, ...server.args].join(" ") : server.url}) is offered to the harness's MCP client (Claude Code, OpenCode and Hermes have one; pi has none)`,
    );
  if (toml.environment.allow_internet)
    notes.push(
      "task.toml: environment.allow_internet: the sandbox has no network here; the task runs offline",
    );
  return notes;
}

/** Parses `task.toml`; every problem names the file, and the line or the field. */
export function parseTaskToml(
  text: string,
): { ok: true; toml: TaskToml; notes: string[] } | { ok: false; problems: string[] } {
  let raw: Record<string, unknown>;
  try {
    raw = parse(text) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof TomlError) {
      const first = err.message.split("\n")[0];
      return { ok: false, problems: [`task.toml: line ${err.line}, column ${err.column}: ${first}`] };
    }
    return { ok: false, problems: [`task.toml: ${String(err)}`] };
  }
  const result = TaskToml.safeParse(raw);
  if (!result.success)
    return {
      ok: false,
      problems: result.error.issues.map(
        (issue) => `task.toml: ${issue.path.join(".") || "(root)"}: ${issue.message}`,
      ),
    };
  const toml = result.data;
  // One memory limit for the sandbox: memory_mb, else Harbor's `memory` size.
  const mb = toml.environment.memory;
  if (toml.environment.memory_mb === undefined && mb !== undefined) {
    if (mb < 16 || mb > 65_536)
      return { ok: false, problems: [`task.toml: environment.memory: ${mb} MB is outside 16..65536 MB`] };
    toml.environment.memory_mb = mb;
  }
  return { ok: true, toml, notes: notesOn(raw, toml) };
}

/** The task's MCP servers in the contracts' shape, each with its transport spelled out. */
export function mcpServersOf(toml: TaskToml): McpServer[] {
  return toml.environment.mcp_servers.map((server) =>
    server.url && server.transport !== "stdio"
      ? { name: server.name, transport: server.transport ?? "streamable-http", url: server.url }
      : { name: server.name, transport: "stdio", command: server.command!, args: server.args },
  );
}

/** The evaluation labels recorded in `task.toml`, in the contracts' shape. */
export function labelsOf(toml: TaskToml): EvaluationLabels | null {
  const evaluation = toml.metadata.repo2env?.evaluation;
  if (!evaluation) return null;
  const text = (value: unknown) =>
    value === undefined ? undefined : typeof value === "string" ? value : JSON.stringify(value);
  const provenance = text(evaluation.provenance);
  const evidence = text(evaluation.evidence);
  return EvaluationLabels.parse({
    status: evaluation.status,
    stage: evaluation.stage,
    reasonCodes: evaluation.reason_codes,
    ...(provenance === undefined ? {} : { provenance }),
    ...(evidence === undefined ? {} : { evidence }),
  });
}

/**
 * The variables each phase of a task (or of one of its steps) sees: `[environment.env]` for every
 * phase, with the phase's own table over it (`[agent.env]`; `[verifier.env]`, then the step's).
 */
export function phaseEnv(
  toml: TaskToml,
  step?: TaskStepToml,
): { agent: Record<string, string>; verifier: Record<string, string> } {
  return {
    agent: { ...toml.environment.env, ...toml.agent.env },
    verifier: { ...toml.environment.env, ...toml.verifier.env, ...(step?.verifier?.env ?? {}) },
  };
}
