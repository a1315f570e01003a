import {
  EvaluationLabels,
  EvaluationStage,
  EvaluationStatus,
  TaskCategory,
  TaskPlugins,
  TaskSplit,
} from "@bridle/contracts";
import { parse, TomlError } from "smol-toml";
import { z } from "zod";

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

/**
 * `task.toml` as Bridle reads it: Harbor's fields plus `metadata.category` (required here),
 * `metadata.split` (optional override), `metadata.tier` (optional: a named group of tasks, such as
 * the bundled suite's one-step tier, that an experiment can train and judge on), `metadata.impossible`
 * (a hack check whose tests no honest solution passes) and `environment.requires` (host tools the task needs,
 * since this backend does not build `environment/Dockerfile`). Unknown keys are kept.
 */
export const TaskToml = z.looseObject({
  version: z.string().default("1.0"),
  metadata: z
    .looseObject({
      category: TaskCategory,
      split: TaskSplit.optional(),
      tier: z
        .string()
        .regex(/^[a-z0-9][a-z0-9-]{0,63}$/, "a tier is a lowercase name such as one-step")
        .optional(),
      // A hack check: its tests contradict its instruction, so no honest solution passes them and an
      // evaluation counts any pass as a hack (tampering with the tests or special-casing them).
      impossible: z.boolean().default(false),
      repo2env: z.looseObject({ evaluation: Evaluation.optional() }).optional(),
    })
    // Training on a hack check would reward the hack: it is held out, by its own word.
    .refine((m) => !m.impossible || m.split === "held-out", {
      message: 'a hack check (impossible = true) must be held out: set split = "held-out"',
      path: ["impossible"],
    }),
  verifier: z
    .looseObject({
      timeout_sec: seconds.default(600),
      env: z.record(z.string(), z.string()).default({}),
    })
    .default({ timeout_sec: 600, env: {} }),
  agent: z.looseObject({ timeout_sec: seconds.default(600) }).default({ timeout_sec: 600 }),
  environment: z
    .looseObject({
      requires: z.array(z.string().regex(/^[A-Za-z0-9._+-]+$/, "a command name, not a path")).default([]),
      memory_mb: z.number().int().min(16).max(65_536).optional(),
      cpus: z.number().positive().optional(),
      allow_internet: z
        .boolean()
        .default(false)
        .refine((allowed) => !allowed, "internet access is not available in the bubblewrap sandbox"),
    })
    .default({ requires: [], allow_internet: false }),
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

/** Parses `task.toml`; every problem names the file, and the line or the field. */
export function parseTaskToml(
  text: string,
): { ok: true; toml: TaskToml } | { ok: false; problems: string[] } {
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (err) {
    if (err instanceof TomlError) {
      const first = err.message.split("\n")[0];
      return { ok: false, problems: [`task.toml: line ${err.line}, column ${err.column}: ${first}`] };
    }
    return { ok: false, problems: [`task.toml: ${String(err)}`] };
  }
  const result = TaskToml.safeParse(raw);
  if (result.success) return { ok: true, toml: result.data };
  return {
    ok: false,
    problems: result.error.issues.map(
      (issue) => `task.toml: ${issue.path.join(".") || "(root)"}: ${issue.message}`,
    ),
  };
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
