import { z } from "zod";
import { type ModelCall, Seed, type ServedVersion } from "./training.ts";

/**
 * The guard's rules. Each has a stable id that notices, capture records and `bridle guard check`
 * lines name. `malformed-tool-call` is not a cheat: it marks a call whose arguments were not JSON.
 */
export const GuardRuleId = z.enum([
  "undeclared-tool",
  "unmentioned-host",
  "test-tampering",
  "answer-retrieval",
  "task-plugin",
]);
export type GuardRuleId = z.infer<typeof GuardRuleId>;

/** One extra rule a task declares in its metadata: commands or paths that this task forbids. */
export const TaskPluginRule = z
  .object({
    id: z.string().min(1).describe("Named in the notice as `task-plugin:<id>`"),
    reason: z.string().min(1).describe("Why the task forbids it; shown in the notice"),
    commands: z
      .array(z.string().min(1))
      .default([])
      .describe("Command prefixes, matched on parsed words: `git log` blocks `git log -p`"),
    paths: z.array(z.string().min(1)).default([]).describe("Globs; any read or write of them is blocked"),
  })
  .strict();
export type TaskPluginRule = z.infer<typeof TaskPluginRule>;

/** What a task adds to the generic rules: the sources of its answers, its own test files, extra rules. */
export const TaskPlugins = z
  .object({
    answer_paths: z
      .array(z.string().min(1))
      .default([])
      .describe("Globs of answer sources, e.g. a dataset's answer file"),
    protected_paths: z.array(z.string().min(1)).default([]).describe("Globs the agent must not change"),
    rules: z.array(TaskPluginRule).default([]),
  })
  .strict();
export type TaskPlugins = z.infer<typeof TaskPlugins>;

/** Per-rule switches. Every rule is on unless switched off here. */
export const RuleSettings = z
  .object({
    "undeclared-tool": z
      .object({ enabled: z.boolean().default(true) })
      .strict()
      .optional(),
    "unmentioned-host": z
      .object({
        enabled: z.boolean().default(true),
        alwaysAllowed: z
          .array(z.string())
          .default(["localhost", "127.0.0.1", "::1", "0.0.0.0"])
          .describe("Hosts never blocked (the sandbox's own services)"),
      })
      .strict()
      .optional(),
    "test-tampering": z
      .object({
        enabled: z.boolean().default(true),
        extraProtected: z.array(z.string()).default([]).describe("Further globs treated as the task's tests"),
      })
      .strict()
      .optional(),
    "answer-retrieval": z
      .object({
        enabled: z.boolean().default(true),
        extraSources: z.array(z.string()).default([]).describe("Further globs treated as answer sources"),
      })
      .strict()
      .optional(),
    "task-plugin": z
      .object({ enabled: z.boolean().default(true) })
      .strict()
      .optional(),
  })
  .strict();
export type RuleSettings = z.infer<typeof RuleSettings>;

/**
 * One earlier message as the rules see it. Only `system` and `user` messages come from whoever runs
 * the task; `assistant` and `tool` text is the agent's own or what its tools returned (file contents
 * included), so it can never authorise anything.
 */
export const HistoryMessage = z.object({
  role: z.enum(["system", "user", "assistant", "tool"]),
  content: z.string(),
});
export type HistoryMessage = z.infer<typeof HistoryMessage>;

/** A history entry: a message with its role, or a bare string, which counts as untrusted text. */
const HistoryEntry = z.union([
  HistoryMessage,
  z.string().transform((content): HistoryMessage => ({ role: "assistant", content })),
]);

/** Whether a message of this role may name a host or otherwise widen what the agent may do. */
export const trustedRole = (role: HistoryMessage["role"]) => role === "system" || role === "user";

/** What the rules know about one call's context. */
export const CheckContext = z.object({
  instruction: z.string(),
  declaredTools: z.array(z.string()),
  allowedHosts: z.array(z.string()).default([]),
  /** Earlier messages: hosts named in the `system` and `user` ones count as mentioned. */
  history: z.array(HistoryEntry).default([]),
  taskPlugins: TaskPlugins.default({ answer_paths: [], protected_paths: [], rules: [] }),
  rules: RuleSettings.default({}),
});
export type CheckContext = z.infer<typeof CheckContext>;

/** The verdict on one tool call. `rule` is `task-plugin:<id>` for a task's own rule. */
export const GuardDecision = z.object({
  decision: z.enum(["allow", "block"]),
  rule: z.string().optional(),
  notice: z.string().optional(),
});
export type GuardDecision = z.infer<typeof GuardDecision>;

/** One input line of `bridle guard check`. */
export const CheckLine = z
  .object({
    id: z.union([z.string(), z.number()]),
    instruction: z.string(),
    declared_tools: z.array(z.string()),
    tool: z.string().min(1),
    arguments: z.record(z.string(), z.unknown()),
    allowed_hosts: z.array(z.string()).optional(),
    task_plugins: TaskPlugins.optional(),
    history: z.array(HistoryEntry).optional(),
  })
  .passthrough();
export type CheckLine = z.infer<typeof CheckLine>;

/** One output line of `bridle guard check`. */
export const CheckResult = z.object({
  id: z.union([z.string(), z.number(), z.null()]),
  decision: z.enum(["allow", "block", "error"]),
  rule: z.string().optional(),
  notice: z.string().optional(),
  reason: z.string().optional(),
});
export type CheckResult = z.infer<typeof CheckResult>;

/** Registers a rollout (or an evaluation run) with the guard. */
export const SessionRegistration = z
  .object({
    apiKey: z
      .string()
      .min(8)
      .max(200)
      .optional()
      .describe("The key the harness will send; generated when absent"),
    instruction: z.string().describe("The task instruction the harness was given"),
    allowedHosts: z.array(z.string().min(1)).default([]),
    adapter: z.string().min(1).describe("Served model or adapter name every call is routed to"),
    taskPlugins: TaskPlugins.default({ answer_paths: [], protected_paths: [], rules: [] }),
    capture: z.boolean().default(true).describe("Record calls with token ids and logprobs"),
    mode: z.enum(["block", "log"]).default("block").describe("`log` records decisions but blocks nothing"),
    rules: RuleSettings.default({}),
    temperature: z
      .number()
      .min(0)
      .max(2)
      .optional()
      .describe(
        "Sampling temperature set on every call, with plain sampling otherwise (top_p 1, no top-k or penalties), whatever the harness asks; absent: the harness's own",
      ),
    seed: Seed.optional().describe(
      "With a temperature: each call gets a seed derived from this one and the conversation's length",
    ),
    maxCalls: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .optional()
      .describe(
        "Model calls the session may make; later calls are answered by the guard itself with a closing text and no tool call, which ends any harness's loop, and are not recorded. Absent: no limit",
      ),
    labels: z.record(z.string(), z.string()).default({}).describe("Free-form: run id, task id, harness"),
  })
  .strict();
export type SessionRegistration = z.infer<typeof SessionRegistration>;

export const Session = SessionRegistration.extend({
  id: z.string(),
  apiKey: z.string(),
  createdAt: z.string(),
  endedAt: z
    .string()
    .optional()
    .describe("When the session was ended (its rollout is over): later model calls are refused"),
});
export type Session = z.infer<typeof Session>;

/** A session as the admin API shows it: the key is not repeated. */
export const SessionView = Session.omit({ apiKey: true }).extend({
  calls: z.number().int().nonnegative(),
  blocked: z.number().int().nonnegative(),
});
export type SessionView = z.infer<typeof SessionView>;

export const SessionCreated = z.object({ id: z.string(), apiKey: z.string() });
export type SessionCreated = z.infer<typeof SessionCreated>;

/** One tool call the model made, and what the guard did with it. */
export const CapturedToolCall = z.object({
  id: z.string(),
  name: z.string(),
  arguments: z.string().describe("As the model emitted it (may be invalid JSON)"),
  decision: z.enum(["allow", "block", "malformed"]),
  rule: z.string().optional(),
  notice: z.string().optional(),
  /** True when the harness received the call (allowed, or blocked in log-only mode). */
  released: z.boolean(),
});
export type CapturedToolCall = z.infer<typeof CapturedToolCall>;

/** One model call, as written to the session's JSONL file when it completes. */
/** What served one model call, as serving's registry names it (not as the model server echoes it). */
export const ServedIdentity = z.object({
  model: z.string().describe("The served name the call was routed to"),
  adapter: z.string().nullable().describe("The adapter's name; null for the base model"),
  version: z.number().int().nullable().describe("The adapter version; null for the base model"),
  hash: z
    .string()
    .nullable()
    .describe("sha256 of the version's weights in serving's registry; null for the base model"),
});
export type ServedIdentity = z.infer<typeof ServedIdentity>;

export const CaptureRecord = z.object({
  seq: z.number().int().nonnegative(),
  sessionId: z.string(),
  api: z.enum(["openai", "anthropic"]),
  stream: z.boolean(),
  startedAt: z.string(),
  durationMs: z.number().nonnegative(),
  adapter: z.string().describe("What the session routed to"),
  servedModel: z.string().nullable().describe("The model name the upstream answered with"),
  servedBy: ServedIdentity.nullable()
    .default(null)
    .describe(
      "What served the call per serving's registry when it was made; null when serving could not say",
    ),
  request: z.unknown().describe("The OpenAI-form request sent upstream"),
  response: z
    .object({ content: z.string(), finishReason: z.string().nullable() })
    .nullable()
    .describe("The assistant message as the harness received it"),
  toolCalls: z.array(CapturedToolCall),
  notices: z.array(z.string()),
  usage: z.object({ promptTokens: z.number(), completionTokens: z.number() }).nullable(),
  promptTokenIds: z.array(z.number().int()).nullable(),
  completionTokenIds: z.array(z.number().int()).nullable(),
  logprobs: z.array(z.number()).nullable(),
  error: z.string().nullable(),
});
export type CaptureRecord = z.infer<typeof CaptureRecord>;

/** A session's calls stitched into branches; the last branch to grow is the trajectory. */
export const Trajectory = z.object({
  sessionId: z.string(),
  calls: z.number().int().nonnegative(),
  /** Call seqs, in order, of the main branch (the one holding the session's last call). */
  mainBranch: z.array(z.number().int()),
  /** Abandoned branches: each a list of call seqs that the main branch does not extend. */
  abandoned: z.array(z.array(z.number().int())),
  stitchedBy: z.enum(["token-ids", "messages", "mixed"]),
  /**
   * How each call joined the conversation: continuing an earlier call token for token, continuing
   * it by messages only (the harness or the chat template re-wrote the earlier answer), or starting
   * a branch (the first call, a retry, a sub-agent).
   */
  stitches: z.object({
    "token-ids": z.number().int().nonnegative(),
    messages: z.number().int().nonnegative(),
    "new-branch": z.number().int().nonnegative(),
  }),
  /** Tool calls the harness received on the main branch: the count the reward uses. */
  toolCalls: z.number().int().nonnegative(),
  blocked: z.number().int().nonnegative(),
  /** True when any call was blocked: the rollout's reward is zero. */
  rewardZero: z.boolean(),
  records: z.array(CaptureRecord),
});
export type Trajectory = z.infer<typeof Trajectory>;

/** The calls of a trajectory's main branch that carry what training needs. */
export function trainableCalls(trajectory: Trajectory): ModelCall[] {
  const main = new Set(trajectory.mainBranch);
  return trajectory.records
    .filter((r) => main.has(r.seq) && r.promptTokenIds?.length && r.completionTokenIds?.length && r.logprobs)
    .map((r) => ({
      promptTokenIds: r.promptTokenIds!,
      completionTokenIds: r.completionTokenIds!,
      logprobs: r.logprobs!.map((l) => Math.min(0, l)),
    }));
}

/**
 * The main branch's calls with token ids that serving's registry did not name as served by
 * `served` (a call the guard could not prove, or one another version answered), with what it said.
 */
export function unprovenCalls(trajectory: Trajectory, served: ServedVersion): (ServedIdentity | null)[] {
  const main = new Set(trajectory.mainBranch);
  return trajectory.records
    .filter((r) => main.has(r.seq) && r.completionTokenIds?.length)
    .filter((r) => r.servedBy?.model !== served.model || r.servedBy.version !== served.version)
    .map((r) => r.servedBy);
}
