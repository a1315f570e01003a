import { z } from "zod";
import { BaseModelInfo, CompletionResult } from "./serving.ts";

/**
 * A stack probe: the walking skeleton through the whole system. The gateway starts a workflow,
 * whose activities ask the serving service (over HTTP) what it serves and for a short completion.
 */
export const ProbeRequest = z
  .object({
    prompt: z.string().min(1).max(2_000).default("Reply with one word: ready?"),
    maxTokens: z.number().int().min(1).max(64).default(8),
  })
  .strict();
export type ProbeRequest = z.infer<typeof ProbeRequest>;

export const ProbeResult = z.object({
  model: BaseModelInfo,
  completion: CompletionResult,
  elapsedMs: z.number().nonnegative(),
});
export type ProbeResult = z.infer<typeof ProbeResult>;

export const WorkflowStatus = z.enum([
  "RUNNING",
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "TERMINATED",
  "CONTINUED_AS_NEW",
  "TIMED_OUT",
  "PAUSED",
  "UNKNOWN",
  "UNSPECIFIED",
]);
export type WorkflowStatus = z.infer<typeof WorkflowStatus>;

export const ProbeStarted = z.object({
  id: z.string(),
  runId: z.string(),
  uiUrl: z.string().url(),
});
export type ProbeStarted = z.infer<typeof ProbeStarted>;

export const ProbeView = z.object({
  id: z.string(),
  status: WorkflowStatus,
  uiUrl: z.string().url(),
  result: ProbeResult.optional(),
  failure: z.string().optional(),
});
export type ProbeView = z.infer<typeof ProbeView>;
