/**
 * `pnpm bench`: the embedded model server (vLLM's CPU build, started as the stack starts it), each
 * figure beside a baseline measured in the same run, as ratios because the machine is noisy:
 *   decode against the memory-bandwidth ceiling, concurrent decode against single-stream, uncached
 *   prefill, the prefix-cache hit rate on replayed pi sessions against an ideal cache, and the LoRA
 *   path against the base model (an adapter on every projection, and one on attention only, which
 *   tells a cost per adapted module from a cost per request).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { callJson } from "@bridle/service-kit";
import { z } from "zod";
import { benchConfig, benchPython, type Engine, makeAdapter, median, startEngine } from "./engine.ts";
import { concurrentDecode, prefill, streamedDecode, type Target } from "./load.ts";
import { loadSessions, replay } from "./replay.ts";
import { printTable, type Row, row } from "./table.ts";

const here = dirname(fileURLToPath(import.meta.url));
const python = benchPython;

const DECODE_TOKENS = 128;
const SINGLE_REPEATS = 3;
const PREFILL_REQUESTS = 3;
const PREFILL_LINES = 56; // about 1,500 prompt tokens
const ADAPTER = "bench-lora";
/** An adapter on the attention projections only: what LoRA costs when the MLP is left alone. */
const ATTENTION_ADAPTER = "bench-lora-attention";
const ATTENTION_TARGETS = "q_proj,k_proj,v_proj,o_proj";

const began = performance.now();
const progress = (line: string) =>
  console.log(`[${((performance.now() - began) / 1000).toFixed(0).padStart(4)} s] ${line}`);

const Bandwidth = z.object({
  threads: z.number(),
  readOneThreadGBs: z.number(),
  readThreadsGBs: z.number(),
  copyGBs: z.number(),
});

function bandwidth(): z.infer<typeof Bandwidth> {
  const out = execFileSync(python, [join(here, "bandwidth.py"), "--gib", "2", "--threads", "2"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  return Bandwidth.parse(JSON.parse(out.trim().split("\n").at(-1)!));
}

/** What a decode step must stream from memory: every byte of the weights. */
function weightBytes(modelDir: string): number {
  return readdirSync(modelDir)
    .filter((f) => f.endsWith(".safetensors"))
    .reduce((sum, f) => sum + statSync(join(modelDir, f)).size, 0);
}

async function singleStream(t: Target): Promise<number> {
  const rates: number[] = [];
  for (let i = 0; i < SINGLE_REPEATS; i++) rates.push((await streamedDecode(t, DECODE_TOKENS)).rate);
  return median(rates);
}

/** Loads an adapter into vLLM and warms it: vLLM reads the adapter's weights on its first use. */
async function loadAdapter(url: string, name: string, dir: string): Promise<Target> {
  await callJson(`${url}/v1/load_lora_adapter`, {
    schema: z.unknown(),
    body: { lora_name: name, lora_path: dir },
    timeoutMs: 120_000,
  });
  const target: Target = { url, model: name };
  await streamedDecode(target, 8);
  return target;
}

async function run(data: string, onEngine: (engine: Engine) => void): Promise<Row[]> {
  const config = benchConfig(data);
  const bytes = weightBytes(config.modelDir);

  progress("memory bandwidth (numpy, 2 GiB array, best of 5)");
  const bw = bandwidth();
  const readGBs = Math.max(bw.readOneThreadGBs, bw.readThreadsGBs);
  const ceiling = (readGBs * 1e9) / bytes;
  progress(
    `  read ${bw.readOneThreadGBs.toFixed(1)} GB/s (1 thread), ${bw.readThreadsGBs.toFixed(1)} GB/s (${bw.threads} threads); copy ${bw.copyGBs.toFixed(1)} GB/s`,
  );

  // Before vLLM starts: making the adapter loads the model once more, in float32.
  progress("making rank-8 LoRA adapters for the base model: every projection, and attention only");
  const adapterDir = makeAdapter(config.modelDir, join(data, "adapter"));
  const attentionDir = makeAdapter(config.modelDir, join(data, "adapter-attention"), ATTENTION_TARGETS);

  progress(`starting vLLM on port ${config.ports.vllm} (log: ${join(data, "vllm.log")})`);
  const engine = await startEngine(config, data);
  onEngine(engine);
  progress("vLLM is healthy");
  const base: Target = { url: config.vllmUrl, model: config.modelName };
  await streamedDecode(base, 8); // the first request pays one-off set-up costs

  progress(`single-stream decode, ${DECODE_TOKENS} tokens, median of ${SINGLE_REPEATS}`);
  const single = await singleStream(base);
  progress(`  ${single.toFixed(1)} tok/s`);
  const streams: Record<number, number> = {};
  for (const n of [8, 16]) {
    progress(`${n} concurrent streams, ${DECODE_TOKENS} tokens each`);
    const c = await concurrentDecode(base, n, DECODE_TOKENS);
    streams[n] = c.rate;
    progress(`  ${c.tokens} tokens in ${c.wallS.toFixed(1)} s: ${c.rate.toFixed(1)} tok/s`);
  }

  progress(`prefill, ${PREFILL_REQUESTS} uncached prompts`);
  const pre = await prefill(base, PREFILL_REQUESTS, PREFILL_LINES);
  progress(`  ${pre.promptTokens.toFixed(0)} prompt tokens each: ${pre.rate.toFixed(0)} tok/s`);

  const sessions = loadSessions(join(here, "fixtures", "pi-sessions.jsonl"));
  progress(`replaying ${sessions.length} pi sessions, one after another`);
  const rep = await replay(base, sessions);
  progress(
    `  ${rep.calls} calls, ${rep.promptTokens} prompt tokens: hit rate ${(rep.hitRate * 100).toFixed(1)}% (blocks of ${rep.blockSize})`,
  );

  progress("loading the adapter through /v1/load_lora_adapter");
  const lora = await loadAdapter(config.vllmUrl, ADAPTER, adapterDir);
  progress("LoRA single-stream decode");
  const loraSingle = await singleStream(lora);
  progress(`  ${loraSingle.toFixed(1)} tok/s`);
  progress("LoRA, 8 concurrent streams");
  const lora8 = (await concurrentDecode(lora, 8, DECODE_TOKENS)).rate;
  progress(`  ${lora8.toFixed(1)} tok/s`);

  const attention = await loadAdapter(config.vllmUrl, ATTENTION_ADAPTER, attentionDir);
  progress(`LoRA on attention only (${ATTENTION_TARGETS}) single-stream decode`);
  const attentionSingle = await singleStream(attention);
  progress(`  ${attentionSingle.toFixed(1)} tok/s`);

  const s8 = streams[8]!;
  const s16 = streams[16]!;
  return [
    row("read bandwidth (numpy sum)", readGBs, "GB/s"),
    row("copy bandwidth (numpy, read+write)", bw.copyGBs, "GB/s"),
    row(`decode ceiling (read / ${(bytes / 1e9).toFixed(2)} GB weights)`, ceiling, "tok/s"),
    row("single-stream decode", single, "tok/s", { value: ceiling, label: "ceiling" }, { min: 0.6 }),
    row("8-stream aggregate decode", s8, "tok/s", { value: single, label: "1 stream" }),
    row("16-stream aggregate decode", s16, "tok/s", { value: single, label: "1 stream" }, { min: 10 }),
    row(`prefill, ~${pre.promptTokens.toFixed(0)}-token uncached prompt`, pre.rate, "tok/s", {
      value: single,
      label: "decode",
    }),
    row(
      "prefix-cache hit rate, pi replay",
      rep.hitRate * 100,
      "%",
      { value: rep.bestHitRate * 100, label: "ideal" },
      { min: 80, on: "value" },
    ),
    row("pi replay prompt throughput", rep.rate, "tok/s", { value: pre.rate, label: "uncached" }),
    row("LoRA single-stream decode", loraSingle, "tok/s", { value: single, label: "base" }),
    row("LoRA 8-stream aggregate decode", lora8, "tok/s", { value: s8, label: "base" }),
    row("LoRA on attention only, single-stream", attentionSingle, "tok/s", { value: single, label: "base" }),
  ];
}

const data = mkdtempSync(join(tmpdir(), "bridle-serving-bench-"));
let engine: Engine | undefined;
let stopping: Promise<void> | undefined;
let interrupted = false;

/** Stops vLLM once, however many paths ask (the run's end, its finally, a signal). */
function stopEngine(): Promise<void> {
  const running = engine;
  if (!running) return Promise.resolve();
  stopping ??= (async () => {
    progress("stopping vLLM");
    const killed = await running.stop();
    progress(
      killed.length === 0
        ? "vLLM stopped cleanly; no engine process left"
        : `vLLM left ${killed.length} process(es) behind (pids ${killed.join(", ")}): killed`,
    );
  })();
  return stopping;
}

// A stop mid-run fails the requests in flight, and the finally below does the rest. A second signal
// quits at once (the handlers are `once`).
const interrupt = (signal: NodeJS.Signals) => {
  interrupted = true;
  progress(`${signal}: stopping`);
  void stopEngine();
};
process.once("SIGINT", interrupt);
process.once("SIGTERM", interrupt);

let finished = false;
try {
  const rows = await run(data, (e) => {
    engine = e;
    if (interrupted) throw new Error("interrupted while vLLM was starting");
  });
  await stopEngine();
  printTable(rows);
  finished = true;
} catch (err) {
  if (!interrupted) throw err;
  process.exitCode = 130;
} finally {
  await stopEngine();
  if (finished || interrupted) rmSync(data, { recursive: true, force: true });
  else progress(`kept ${data} (vLLM's log is there)`);
}
