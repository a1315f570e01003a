import { z } from "zod";

const Segment = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "letters, digits, '.', '_' or '-'");

/** An adapter's name: `<model>/<harness>/<run>`. Its versions are served as `<name>@v<N>`. */
export const AdapterName = z
  .string()
  .refine((s) => s.split("/").length === 3 && s.split("/").every((p) => Segment.safeParse(p).success), {
    message: "expected <model>/<harness>/<run>, each part letters, digits, '.', '_' or '-'",
  });
export type AdapterName = z.infer<typeof AdapterName>;

/** The adapter a training run makes: one per (base model, harness, run). */
export const adapterName = (parts: { model: string; harness: string; run: string }): string =>
  `${parts.model}/${parts.harness}/${parts.run}`;

/** The name the model server serves one version of an adapter under. */
export const servedName = (adapter: string, version: number): string => `${adapter}@v${version}`;

/** The parts of an adapter's name, or of a served name `<name>@v<N>`; null for a base model. */
export function adapterParts(name: string): { model: string; harness: string; run: string } | null {
  const parts = name.split("@")[0]!.split("/");
  return parts.length === 3 ? { model: parts[0]!, harness: parts[1]!, run: parts[2]! } : null;
}

/** The version a served name `<name>@v<N>` names (servedName's inverse); null for a bare name or a base model. */
export function versionOf(served: string): { name: string; version: number } | null {
  const at = /^(.+)@v(\d+)$/.exec(served);
  return at ? { name: at[1]!, version: Number(at[2]) } : null;
}

/** The harness an adapter was trained in, read from its name or a served name; null for a base model. */
export const adapterHarness = (name: string): string | null => adapterParts(name)?.harness ?? null;

/** Which adapter version served a completion; null when the base model did. */
export const AdapterStamp = z
  .object({ name: AdapterName, version: z.number().int(), servedName: z.string(), hash: z.string() })
  .nullable();
export type AdapterStamp = z.infer<typeof AdapterStamp>;

/** What the model server says about the base model it serves. */
export const BaseModelInfo = z.object({
  id: z.string().describe("Served name of the base model"),
  root: z.string().describe("Where the weights were loaded from"),
  maxModelLen: z.number().int().positive().nullable(),
  adapters: z.array(z.object({ id: z.string(), root: z.string() })),
});
export type BaseModelInfo = z.infer<typeof BaseModelInfo>;

/** One model server of serving's pool, as the guard routes by it. */
export const ModelNode = z.object({
  url: z.string().url(),
  state: z.enum(["up", "down"]),
  models: z
    .array(z.string())
    .describe("What it serves now: the base model's name and the adapter versions loaded and serving"),
  error: z.string().nullable().describe("Why it is down, or why it is left out of the pool"),
});
export type ModelNode = z.infer<typeof ModelNode>;

/** The pool of model servers behind serving: every node serves the same base model. */
export const ModelNodes = z.object({
  baseModel: z.string().nullable(),
  serving: z
    .array(z.string())
    .describe("Every adapter version serving: each is loaded on every node that is up, or is being loaded"),
  nodes: z.array(ModelNode),
});
export type ModelNodes = z.infer<typeof ModelNodes>;

/** A short completion, asked for with token ids and logprobs, as training needs them. */
export const CompletionRequest = z.object({
  model: z
    .string()
    .min(1)
    .optional()
    .describe("Base model, adapter name (its current version) or `<name>@v<N>`; the base model if absent"),
  prompt: z.string().min(1).max(8_000),
  maxTokens: z.number().int().min(1).max(256).default(16),
  temperature: z.number().min(0).max(2).default(0),
  seed: z.number().int().optional(),
});
export type CompletionRequest = z.infer<typeof CompletionRequest>;

export const CompletionResult = z.object({
  model: z.string(),
  adapter: AdapterStamp.describe(
    "The adapter version and hash that served this completion; null for the base model",
  ),
  text: z.string(),
  finishReason: z.string().nullable(),
  promptTokenIds: z.array(z.number().int()),
  completionTokenIds: z.array(z.number().int()),
  logprobs: z.array(z.number()),
});
export type CompletionResult = z.infer<typeof CompletionResult>;

export const AdapterState = z.enum(["loading", "serving", "retired", "failed"]);
export type AdapterState = z.infer<typeof AdapterState>;

/** One version of one adapter. */
export const AdapterRef = z.object({ name: AdapterName, version: z.number().int().min(1) }).strict();
export type AdapterRef = z.infer<typeof AdapterRef>;

/** One version of an adapter, as the registry keeps it across restarts. */
export const AdapterVersion = z.object({
  name: AdapterName,
  version: z.number().int().min(1),
  servedName: z.string().describe("The model name vLLM serves it under: `<name>@v<version>`"),
  path: z.string(),
  hash: z.string().describe("sha256 over adapter_config.json and adapter_model.safetensors"),
  step: z.number().int().nullable().describe("The trainer step that produced it"),
  parent: AdapterRef.nullable()
    .default(null)
    .describe("The version its weights started from: the previous version, or the one its run started from"),
  state: AdapterState,
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  canaryDelta: z
    .number()
    .nullable()
    .describe("Largest |logprob difference| from the base model on the canary prompt"),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type AdapterVersion = z.infer<typeof AdapterVersion>;

export const AdapterView = z.object({
  name: AdapterName,
  current: z.number().int().nullable().describe("The newest serving version; what the bare name routes to"),
  versions: z.array(AdapterVersion),
});
export type AdapterView = z.infer<typeof AdapterView>;

/** Every adapter serving knows and its versions: what `GET /v1/adapters` answers. */
export const AdapterList = z.object({ adapters: z.array(AdapterView) });
export type AdapterList = z.infer<typeof AdapterList>;

/** Where an adapter's files are fetched from: its owner's URL and the content hash they must have. */
export const AdapterSource = z
  .object({
    url: z
      .string()
      .url()
      .describe(
        "Base URL of the adapter's files: <url>/adapter_config.json and <url>/adapter_model.safetensors",
      ),
    hash: z
      .string()
      .regex(/^[0-9a-f]{64}$/, "a sha256 in hex")
      .describe("sha256 over the two files (each as name, NUL, bytes, NUL): the files must match it"),
  })
  .strict();
export type AdapterSource = z.infer<typeof AdapterSource>;

/**
 * Load a new version of an adapter: by reference (`source`, fetched and checked against its hash:
 * how training hands its adapters over), or from a PEFT folder on the serving host (`path`).
 */
export const LoadAdapterRequest = z
  .object({
    path: z.string().min(1).optional().describe("A PEFT folder on the serving host"),
    source: AdapterSource.optional(),
    step: z.number().int().min(0).optional(),
    parent: AdapterRef.optional().describe("The version its weights started from (lineage)"),
    version: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe("Makes the load idempotent: the same version and content returns the existing record"),
  })
  .strict()
  .refine((r) => (r.path === undefined) !== (r.source === undefined), {
    message: "give exactly one of `path` and `source`",
    path: ["path"],
  });
export type LoadAdapterRequest = z.infer<typeof LoadAdapterRequest>;

/** Log-probabilities of given completion tokens after a prompt, under a model or adapter. */
export const ScoreRequest = z
  .object({
    model: z.string().min(1).optional(),
    promptTokenIds: z.array(z.number().int().nonnegative()).min(1),
    completionTokenIds: z.array(z.number().int().nonnegative()).min(1),
  })
  .strict();
export type ScoreRequest = z.infer<typeof ScoreRequest>;

export const ScoreResult = z.object({
  model: z.string(),
  adapter: AdapterStamp,
  logprobs: z.array(z.number()),
  sum: z.number(),
});
export type ScoreResult = z.infer<typeof ScoreResult>;

/** A lineage: the adapters of one (base model, harness), whichever run made them. */
export const LineageKey = z.object({ model: z.string().min(1), harness: z.string().min(1) });
export type LineageKey = z.infer<typeof LineageKey>;

/** The lineage an adapter or served name belongs to; null for a base model. */
export function lineageOf(name: string): LineageKey | null {
  const parts = adapterParts(name);
  return parts && { model: parts.model, harness: parts.harness };
}

/** Why a lineage's promoted version changed: a promotion or a rollback, and the evidence. */
export const LineageDecision = z.object({
  id: z.string().describe("Idempotency key: the workflow that made the decision"),
  action: z.enum(["promote", "rollback"]),
  adapter: AdapterRef.nullable().describe("What is promoted after it; null: the base model alone"),
  previous: AdapterRef.nullable().describe("What was promoted before it"),
  reason: z.string(),
  evalId: z.string().nullable().describe("The evaluation behind it; null for a decision by hand"),
  at: z.string(),
});
export type LineageDecision = z.infer<typeof LineageDecision>;

/** Ask serving to change a lineage's promoted version (done by the promotion and rollback workflows). */
export const DecisionRequest = z
  .object({
    id: z.string().min(1).max(300),
    action: z.enum(["promote", "rollback"]),
    adapter: AdapterRef.describe(
      "promote: the version to promote; rollback: the promoted version found wanting (refused if it no longer is)",
    ),
    reason: z.string().min(1).max(4_000),
    evalId: z.string().min(1).nullable().default(null),
  })
  .strict();
export type DecisionRequest = z.infer<typeof DecisionRequest>;

export const LineageView = LineageKey.extend({
  promoted: AdapterVersion.nullable().describe("What runs starting from the lineage start from"),
  decisions: z.array(LineageDecision).describe("Oldest first"),
  adapters: z.array(AdapterView).describe("Every adapter of the lineage, each version with its parent"),
});
export type LineageView = z.infer<typeof LineageView>;

export const LineageList = z.object({ lineages: z.array(LineageView) });
export type LineageList = z.infer<typeof LineageList>;
