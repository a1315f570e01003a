import type { BaseModelInfo } from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";
import { z } from "zod";

const ModelList = z.object({
  data: z.array(
    z.object({
      id: z.string(),
      root: z.string().nullish(),
      parent: z.string().nullish(),
      max_model_len: z.number().int().nullish(),
    }),
  ),
});

const Completion = z.object({
  model: z.string(),
  choices: z
    .array(
      z.object({
        text: z.string(),
        finish_reason: z.string().nullable(),
        token_ids: z.array(z.number().int()).nullish(),
        prompt_token_ids: z.array(z.number().int()).nullish(),
        logprobs: z
          .object({
            token_logprobs: z.array(z.number().nullable()),
            top_logprobs: z.array(z.record(z.string(), z.number()).nullable()).nullish(),
          })
          .nullish(),
        prompt_logprobs: z
          .array(z.record(z.string(), z.object({ logprob: z.number() })).nullable())
          .nullish(),
      }),
    )
    .min(1),
});

/** A completion as vLLM returns it, before Bridle stamps it. */
export interface RawCompletion {
  model: string;
  text: string;
  finishReason: string | null;
  promptTokenIds: number[];
  completionTokenIds: number[];
  logprobs: number[];
}

/** A thin client for the vLLM OpenAI-compatible server, including its runtime LoRA endpoints. */
export class VllmClient {
  constructor(
    readonly baseUrl: string,
    private readonly timeoutMs: number,
  ) {}

  /** The base model (the entry without a parent) and the adapters loaded on top of it. */
  async baseModel(): Promise<BaseModelInfo> {
    const list = await callJson(`${this.baseUrl}/v1/models`, { schema: ModelList, timeoutMs: 10_000 });
    const base = list.data.find((m) => !m.parent);
    if (!base) throw new Error("the model server lists no base model");
    return {
      id: base.id,
      root: base.root ?? base.id,
      maxModelLen: base.max_model_len ?? null,
      adapters: list.data.filter((m) => m.parent).map((m) => ({ id: m.id, root: m.root ?? m.id })),
    };
  }

  /** Loads an adapter under a new name (vLLM answers 200 with plain text). */
  async loadLora(name: string, path: string): Promise<void> {
    await callJson(`${this.baseUrl}/v1/load_lora_adapter`, {
      schema: z.unknown(),
      body: { lora_name: name, lora_path: path },
      timeoutMs: this.timeoutMs,
    });
  }

  async unloadLora(name: string): Promise<void> {
    await callJson(`${this.baseUrl}/v1/unload_lora_adapter`, {
      schema: z.unknown(),
      body: { lora_name: name },
      timeoutMs: 30_000,
    });
  }

  /** A plain completion with the token ids and sampling logprobs that training needs. */
  async complete(input: {
    model: string;
    prompt: string;
    maxTokens: number;
    temperature: number;
    seed?: number | undefined;
  }): Promise<RawCompletion> {
    const response = await callJson(`${this.baseUrl}/v1/completions`, {
      schema: Completion,
      timeoutMs: this.timeoutMs,
      body: {
        model: input.model,
        prompt: input.prompt,
        max_tokens: input.maxTokens,
        temperature: input.temperature,
        ...(input.seed === undefined ? {} : { seed: input.seed }),
        logprobs: 0,
        return_token_ids: true,
      },
    });
    const choice = response.choices[0]!;
    return {
      model: response.model,
      text: choice.text,
      finishReason: choice.finish_reason,
      promptTokenIds: choice.prompt_token_ids ?? [],
      completionTokenIds: choice.token_ids ?? [],
      logprobs: (choice.logprobs?.token_logprobs ?? []).map((lp) => lp ?? 0),
    };
  }

  /**
   * The log-probability of each token of `tokens` after the first, under `model` (vLLM's
   * prompt_logprobs): scoring a given text without sampling anything.
   */
  async promptLogprobs(model: string, tokens: number[] | string): Promise<number[]> {
    const response = await callJson(`${this.baseUrl}/v1/completions`, {
      schema: Completion,
      timeoutMs: this.timeoutMs,
      body: {
        model,
        prompt: tokens,
        max_tokens: 1,
        temperature: 0,
        prompt_logprobs: 0,
        return_token_ids: true,
      },
    });
    const choice = response.choices[0]!;
    const ids = choice.prompt_token_ids ?? [];
    return (choice.prompt_logprobs ?? []).slice(1).map((entry, i) => {
      const lp = entry?.[String(ids[i + 1])]?.logprob;
      if (lp === undefined) throw new Error(`the model server gave no logprob for prompt token ${i + 1}`);
      return lp;
    });
  }

  /**
   * The `k` most likely next tokens after `prompt` and their logprobs, from one forward pass: a
   * cheap fingerprint of the model's output distribution.
   */
  async nextTokenLogprobs(model: string, prompt: string, k: number): Promise<Record<string, number>> {
    const response = await callJson(`${this.baseUrl}/v1/completions`, {
      schema: Completion,
      timeoutMs: this.timeoutMs,
      body: { model, prompt, max_tokens: 1, temperature: 0, logprobs: k },
    });
    const top = response.choices[0]!.logprobs?.top_logprobs?.[0];
    if (!top) throw new Error("the model server returned no top logprobs");
    return top;
  }
}
