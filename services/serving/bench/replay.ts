/**
 * Prefix caching on real harness traffic: replays recorded pi sessions against vLLM and reads the
 * hit rate from vLLM's own Prometheus counters, beside the best any prefix cache with vLLM's block
 * size could do on the same prompts.
 */
import { readFileSync } from "node:fs";
import { callJson } from "@bridle/service-kit";
import { z } from "zod";
import type { Target } from "./load.ts";

/** One recorded model call of a harness session: the OpenAI-form request as pi sent it. */
const FixtureCall = z.object({
  session: z.number().int(),
  seq: z.number().int(),
  messages: z.array(z.unknown()),
  tools: z.array(z.unknown()),
});
type FixtureCall = z.infer<typeof FixtureCall>;

const ChatCompletion = z.object({
  usage: z.object({ prompt_tokens: z.number().int() }),
  prompt_token_ids: z.array(z.number().int()),
});

/** The fixture's sessions, each as its calls in the order the harness made them. */
export function loadSessions(file: string): FixtureCall[][] {
  const calls = readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim().length > 0)
    .map((line) => FixtureCall.parse(JSON.parse(line)));
  const ids = [...new Set(calls.map((c) => c.session))].sort((a, b) => a - b);
  return ids.map((id) => calls.filter((c) => c.session === id).sort((a, b) => a.seq - b.seq));
}

/** vLLM's counters and the cache's block size, from its Prometheus text. */
export async function cacheMetrics(
  url: string,
): Promise<{ queries: number; hits: number; blockSize: number }> {
  const text = await fetch(`${url}/metrics`).then((r) => r.text());
  const sum = (metric: string) =>
    text
      .split("\n")
      .filter((line) => line.startsWith(`${metric}{`) || line.startsWith(`${metric} `))
      .reduce((total, line) => total + Number(line.slice(line.lastIndexOf(" ") + 1)), 0);
  const blockSize = /vllm:cache_config_info\{[^}]*\bblock_size="(\d+)"/.exec(text)?.[1];
  if (blockSize === undefined) throw new Error("vLLM's /metrics has no cache_config_info block_size");
  return {
    queries: sum("vllm:prefix_cache_queries_total"),
    hits: sum("vllm:prefix_cache_hits_total"),
    blockSize: Number(blockSize),
  };
}

const commonPrefix = (a: number[], b: number[]) => {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
};

/**
 * The hit rate of an ideal prefix cache that never evicts: each prompt reuses its longest prefix
 * shared with any earlier prompt, in whole blocks, and always computes its last token (as vLLM does).
 */
function bestHitRate(prompts: number[][], blockSize: number): number {
  let hits = 0;
  let queries = 0;
  prompts.forEach((prompt, i) => {
    const shared = Math.max(0, ...prompts.slice(0, i).map((earlier) => commonPrefix(prompt, earlier)));
    hits += Math.floor(Math.min(shared, prompt.length - 1) / blockSize) * blockSize;
    queries += prompt.length;
  });
  return queries > 0 ? hits / queries : 0;
}

export interface ReplayResult {
  calls: number;
  promptTokens: number;
  rate: number;
  hitRate: number;
  bestHitRate: number;
  blockSize: number;
}

/** Sessions one after another, each session's calls in order, one new token per call. */
export async function replay(t: Target, sessions: FixtureCall[][]): Promise<ReplayResult> {
  const before = await cacheMetrics(t.url);
  const prompts: number[][] = [];
  const started = performance.now();
  for (const session of sessions) {
    for (const call of session) {
      const c = await callJson(`${t.url}/v1/chat/completions`, {
        schema: ChatCompletion,
        body: {
          model: t.model,
          messages: call.messages,
          tools: call.tools,
          max_tokens: 1,
          temperature: 0,
          return_token_ids: true,
        },
        timeoutMs: 600_000,
      });
      prompts.push(c.prompt_token_ids);
    }
  }
  const wallS = (performance.now() - started) / 1000;
  // The engine publishes each step's counters beside its output: give the last step a moment.
  await new Promise((r) => setTimeout(r, 500));
  const after = await cacheMetrics(t.url);
  const promptTokens = prompts.reduce((sum, p) => sum + p.length, 0);
  const queries = after.queries - before.queries;
  return {
    calls: prompts.length,
    promptTokens,
    rate: promptTokens / wallS,
    hitRate: queries > 0 ? (after.hits - before.hits) / queries : 0,
    bestHitRate: bestHitRate(prompts, after.blockSize),
    blockSize: after.blockSize,
  };
}
