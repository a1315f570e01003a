/**
 * `pnpm bench:lora`: the LoRA path of the embedded model server with Bridle's CPU LoRA ops (the
 * vLLM plugin in infra/vllm) against vLLM's own, in one run: the same model and adapter on the same
 * stack flags, the baseline arm started with the plugin left out (VLLM_PLUGINS). For each arm:
 * decode at 4 streams for the base model, the adapter, and both at once, uncached prefill, and
 * whether a base-model request batched beside an adapter request is computed with the base weights
 * (vLLM's own ops give its tokens the last adapter slot). One adapter slot, so that the adapter in
 * use holds the last one, as every slot does once a training run has loaded a few versions.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { callJson } from "@bridle/service-kit";
import { z } from "zod";
import { benchConfig, type Engine, makeAdapter, median, startEngine } from "./engine.ts";
import { concurrentDecode, prefill, streamedDecode, type Target } from "./load.ts";
import { printTable, type Row, row } from "./table.ts";

const STREAMS = 4;
const DECODE_TOKENS = 96;
const REPEATS = 3;
const PREFILL_REQUESTS = 2;
const PREFILL_LINES = 56; // about 1,500 prompt tokens
const ADAPTER = "bench-lora";
const PROBE_TOKENS = 32;

const began = performance.now();
const progress = (line: string) =>
  console.log(`[${((performance.now() - began) / 1000).toFixed(0).padStart(4)} s] ${line}`);

interface Arm {
  label: string;
  /** Added to vLLM's environment: which general plugins it loads. */
  env: Record<string, string>;
}
const BRIDLE: Arm = { label: "Bridle's ops", env: {} };
// An allow-list naming no plugin: vLLM loads none, so its own torch ops serve LoRA.
const VLLM: Arm = { label: "vLLM's ops", env: { VLLM_PLUGINS: "" } };

interface Figures {
  base: number;
  adapter: number;
  mixed: number;
  basePrefill: number;
  adapterPrefill: number;
  /** Largest logprob difference of a base request batched beside the adapter vs beside the base. */
  drift: number;
}

const Logprobs = z.object({
  choices: z.array(z.object({ logprobs: z.object({ token_logprobs: z.array(z.number().nullable()) }) })),
});

/** Greedy logprobs of one request, sent together with `beside` so that vLLM batches the two. */
async function probe(t: Target, beside: Target): Promise<number[]> {
  const ask = (x: Target) =>
    callJson(`${x.url}/v1/completions`, {
      schema: Logprobs,
      body: {
        model: x.model,
        prompt: "def fibonacci(n):",
        max_tokens: PROBE_TOKENS,
        temperature: 0,
        logprobs: 0,
      },
      timeoutMs: 600_000,
    });
  const [mine] = await Promise.all([ask(t), ask(beside)]);
  return mine.choices[0]!.logprobs.token_logprobs.map((lp) => lp ?? 0);
}

const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - (b[i] ?? 0))));

/** Median aggregate rate of `REPEATS` rounds of `STREAMS` requests split over `targets`. */
async function decode(targets: Target[]): Promise<number> {
  const rates: number[] = [];
  for (let i = 0; i < REPEATS; i++) {
    const started = performance.now();
    const done = await Promise.all(
      Array.from({ length: STREAMS }, (_, s) =>
        concurrentDecode(targets[s % targets.length]!, 1, DECODE_TOKENS),
      ),
    );
    const tokens = done.reduce((sum, d) => sum + d.tokens, 0);
    rates.push(tokens / ((performance.now() - started) / 1000));
  }
  return median(rates);
}

async function measure(
  arm: Arm,
  adapterDir: string,
  data: string,
  onEngine: (e: Engine) => void,
): Promise<Figures> {
  const config = benchConfig(data);
  const logDir = join(data, arm === BRIDLE ? "bridle" : "vllm");
  mkdirSync(logDir, { recursive: true });
  progress(`${arm.label}: starting vLLM (log: ${logDir})`);
  const engine = await startEngine({ ...config, maxLoras: 1 }, logDir, arm.env);
  onEngine(engine);
  try {
    const base: Target = { url: config.vllmUrl, model: config.modelName };
    await callJson(`${config.vllmUrl}/v1/load_lora_adapter`, {
      body: { lora_name: ADAPTER, lora_path: adapterDir },
      schema: z.unknown(),
      timeoutMs: 120_000,
    });
    const adapter: Target = { url: config.vllmUrl, model: ADAPTER };
    await streamedDecode(base, 8);
    await streamedDecode(adapter, 8); // vLLM reads the adapter's weights on its first use
    const figures: Figures = {
      base: await decode([base]),
      adapter: await decode([adapter]),
      mixed: await decode([base, adapter]),
      basePrefill: (await prefill(base, PREFILL_REQUESTS, PREFILL_LINES)).rate,
      adapterPrefill: (await prefill(adapter, PREFILL_REQUESTS, PREFILL_LINES)).rate,
      drift: maxDiff(await probe(base, adapter), await probe(base, base)),
    };
    progress(
      `  ${STREAMS}-stream decode: base ${figures.base.toFixed(1)}, adapter ${figures.adapter.toFixed(1)}, ` +
        `half and half ${figures.mixed.toFixed(1)} tok/s; prefill base ${figures.basePrefill.toFixed(0)}, ` +
        `adapter ${figures.adapterPrefill.toFixed(0)} tok/s; base beside the adapter drifts ${figures.drift.toFixed(4)}`,
    );
    return figures;
  } finally {
    await engine.stop();
  }
}

const data = mkdtempSync(join(tmpdir(), "bridle-lora-bench-"));
let engine: Engine | undefined;
const stop = (signal: NodeJS.Signals) => {
  progress(`${signal}: stopping`);
  void engine?.stop().finally(() => process.exit(130));
};
process.once("SIGINT", stop);
process.once("SIGTERM", stop);

try {
  const config = benchConfig(data);
  progress(`making a rank-8 LoRA adapter on every projection of ${config.modelName}`);
  const adapterDir = makeAdapter(config.modelDir, join(data, "adapter"));
  // BRIDLE_LORA_BENCH_ORDER=bridle-first runs the arms the other way round (an order effect shows
  // as a base-model difference between the arms, where both run the same code).
  const bridleFirst = process.env.BRIDLE_LORA_BENCH_ORDER === "bridle-first";
  const arm = (a: Arm) =>
    measure(a, adapterDir, data, (e) => {
      engine = e;
    });
  const first = await arm(bridleFirst ? BRIDLE : VLLM);
  const second = await arm(bridleFirst ? VLLM : BRIDLE);
  const [ours, theirs] = bridleFirst ? [first, second] : [second, first];
  const vs = { label: VLLM.label };
  const againstBase = (label: string, r: typeof ours) => [
    row(`adapter decode against base (${label})`, r.adapter, "tok/s", { value: r.base, label: "base" }),
    row(`adapter prefill against base (${label})`, r.adapterPrefill, "tok/s", {
      value: r.basePrefill,
      label: "base",
    }),
  ];
  const rows: Row[] = [
    row(`${STREAMS}-stream decode, base model`, ours.base, "tok/s", { value: theirs.base, ...vs }),
    row(
      `${STREAMS}-stream decode, adapter`,
      ours.adapter,
      "tok/s",
      { value: theirs.adapter, ...vs },
      { min: 1 },
    ),
    row(`${STREAMS}-stream decode, half base half adapter`, ours.mixed, "tok/s", {
      value: theirs.mixed,
      ...vs,
    }),
    row(
      "uncached prefill, adapter",
      ours.adapterPrefill,
      "tok/s",
      { value: theirs.adapterPrefill, ...vs },
      { min: 1 },
    ),
    ...againstBase(BRIDLE.label, ours),
    ...againstBase(VLLM.label, theirs),
  ];
  printTable(rows);
  console.log(
    `\nA base-model request batched beside an adapter request, against the same request beside another ` +
      `base one (largest logprob difference over ${PROBE_TOKENS} greedy tokens; 0 means computed with the base weights):\n` +
      `  ${BRIDLE.label}: ${ours.drift.toFixed(4)}   ${VLLM.label}: ${theirs.drift.toFixed(4)}`,
  );
  if (ours.drift !== 0) {
    console.log(
      `FAIL: with ${BRIDLE.label} a base request beside an adapter is not computed with the base weights`,
    );
    process.exitCode = 1;
  }
  rmSync(data, { recursive: true, force: true });
} catch (err) {
  progress(`kept ${data} (vLLM's logs are there)`);
  throw err;
}
