/**
 * The requests the serving benchmark sends to vLLM: streamed and concurrent decode, uncached
 * prefill, and a replay of real harness sessions, each returning the figures it measures.
 */
import { randomBytes } from "node:crypto";
import { callJson } from "@bridle/service-kit";
import { z } from "zod";

/** A vLLM server and the model (base or adapter name) the requests ask for. */
export interface Target {
  url: string;
  model: string;
}

const Usage = z.object({ prompt_tokens: z.number().int(), completion_tokens: z.number().int() });
const Completion = z.object({ usage: Usage });
const StreamChunk = z.object({ choices: z.array(z.unknown()).optional(), usage: Usage.nullish() });

/** Short, so decode dominates: the figure is the rate of generated tokens. */
const DECODE_PROMPT = "# utils/dates.py: small, well-tested helpers for parsing and formatting dates\n";
const TIMEOUT_MS = 600_000;

const seconds = (since: number) => (performance.now() - since) / 1000;

/** A fixed-length generation: `ignore_eos` so every request decodes exactly `maxTokens` tokens. */
const decodeBody = (t: Target, maxTokens: number) => ({
  model: t.model,
  prompt: DECODE_PROMPT,
  max_tokens: maxTokens,
  temperature: 0,
  ignore_eos: true,
});

/** SSE `data:` payloads of a streamed response, each with the time it arrived. */
async function* events(response: Response): AsyncGenerator<{ at: number; data: string }> {
  if (!response.body) throw new Error("a streamed response without a body");
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    const lines = buffer.split("\n");
    buffer = lines.pop() ?? "";
    const at = performance.now();
    for (const line of lines) {
      if (line.startsWith("data: ") && line !== "data: [DONE]") yield { at, data: line.slice(6) };
    }
  }
}

/** One streamed completion; the decode rate counts from the first token, so prefill is left out. */
export async function streamedDecode(
  t: Target,
  maxTokens: number,
): Promise<{ tokens: number; rate: number }> {
  const response = await fetch(`${t.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      ...decodeBody(t, maxTokens),
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  if (!response.ok) throw new Error(`${t.url}/v1/completions: ${response.status} ${await response.text()}`);
  let first: number | undefined;
  let last = 0;
  let tokens = 0;
  for await (const { at, data } of events(response)) {
    const chunk = StreamChunk.parse(JSON.parse(data));
    if (chunk.choices && chunk.choices.length > 0) {
      first ??= at;
      last = at;
    }
    if (chunk.usage) tokens = chunk.usage.completion_tokens;
  }
  if (first === undefined || tokens < 2) throw new Error(`a stream of ${tokens} tokens has no decode rate`);
  return { tokens, rate: (tokens - 1) / ((last - first) / 1000) };
}

/** `streams` requests started together: completion tokens of all over the wall time. */
export async function concurrentDecode(
  t: Target,
  streams: number,
  maxTokens: number,
): Promise<{ tokens: number; wallS: number; rate: number }> {
  const started = performance.now();
  const done = await Promise.all(
    Array.from({ length: streams }, () =>
      callJson(`${t.url}/v1/completions`, {
        schema: Completion,
        body: decodeBody(t, maxTokens),
        timeoutMs: TIMEOUT_MS,
      }),
    ),
  );
  const wallS = seconds(started);
  const tokens = done.reduce((sum, c) => sum + c.usage.completion_tokens, 0);
  return { tokens, wallS, rate: tokens / wallS };
}

/**
 * A code-like prompt of about 27 tokens a line behind a random prefix: the prefix changes the
 * first cache block, so no block of the prompt can hit the prefix cache.
 */
function uncachedPrompt(lines: number): string {
  const body = Array.from(
    { length: lines },
    (_, i) =>
      `def scale_${i}(values: list[float]) -> list[float]:\n    return [v * ${i + 2} for v in values]\n`,
  );
  return `# run ${randomBytes(12).toString("hex")}\n${body.join("\n")}`;
}

/** Uncached prompts with one new token each: prompt tokens of all over their summed time. */
export async function prefill(
  t: Target,
  requests: number,
  lines: number,
): Promise<{ promptTokens: number; rate: number }> {
  let promptTokens = 0;
  let total = 0;
  for (let i = 0; i < requests; i++) {
    const started = performance.now();
    const c = await callJson(`${t.url}/v1/completions`, {
      schema: Completion,
      body: { model: t.model, prompt: uncachedPrompt(lines), max_tokens: 1, temperature: 0 },
      timeoutMs: TIMEOUT_MS,
    });
    total += seconds(started);
    promptTokens += c.usage.prompt_tokens;
  }
  return { promptTokens: promptTokens / requests, rate: promptTokens / total };
}
