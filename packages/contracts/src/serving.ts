import { z } from "zod";

/** What the model server says about the base model it serves. */
export const BaseModelInfo = z.object({
  id: z.string().describe("Served name of the base model"),
  root: z.string().describe("Where the weights were loaded from"),
  maxModelLen: z.number().int().positive().nullable(),
  adapters: z.array(z.object({ id: z.string(), root: z.string() })),
});
export type BaseModelInfo = z.infer<typeof BaseModelInfo>;

/** A short completion, asked for with token ids and logprobs, as training needs them. */
export const CompletionRequest = z.object({
  model: z.string().min(1).optional().describe("Served model or adapter name; the base model if absent"),
  prompt: z.string().min(1).max(8_000),
  maxTokens: z.number().int().min(1).max(256).default(16),
  temperature: z.number().min(0).max(2).default(0),
  seed: z.number().int().optional(),
});
export type CompletionRequest = z.infer<typeof CompletionRequest>;

export const CompletionResult = z.object({
  model: z.string(),
  text: z.string(),
  finishReason: z.string().nullable(),
  promptTokenIds: z.array(z.number().int()),
  completionTokenIds: z.array(z.number().int()),
  logprobs: z.array(z.number()),
});
export type CompletionResult = z.infer<typeof CompletionResult>;
