/**
 * `pnpm bench:contention`: what the rest of a rollout costs the model server. During a rollout
 * the model server shares the machine's cores with the harness, the guard, the agent's tool calls
 * and the verifier. vLLM's CPU backend runs each step as OpenMP threads pinned one per core, so a
 * step waits for its slowest thread: a burst of other work on one core holds the whole step.
 * This runs the same concurrent decode three ways, side by side in one run (ratios, since the
 * machine is noisy): on a quiet machine; beside bursty CPU load at the same priority (what a
 * rollout looks like to vLLM); and beside the same load at a lower priority (nice), which is what
 * the stack does with everything but the model server and the trainer.
 *
 *   pnpm bench:contention [-- --streams 4 --tokens 128 --load 1 --busy-ms 2 --idle-ms 8 --nice 5,10]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { setPriority, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { benchConfig, median, startEngine } from "./engine.ts";
import { concurrentDecode, streamedDecode, type Target } from "./load.ts";

const { values } = parseArgs({
  args: process.argv.slice(2).filter((a) => a !== "--"),
  options: {
    streams: { type: "string", default: "4" },
    tokens: { type: "string", default: "128" },
    load: { type: "string", default: "1" },
    "busy-ms": { type: "string", default: "2" },
    "idle-ms": { type: "string", default: "8" },
    nice: { type: "string", default: "5,10" },
    repeats: { type: "string", default: "3" },
  },
});
const streams = Number(values.streams);
const tokens = Number(values.tokens);
const repeats = Number(values.repeats);
const niceness = values.nice.split(",").map(Number);

const began = performance.now();
const say = (line: string) =>
  console.log(`[${((performance.now() - began) / 1000).toFixed(0).padStart(4)} s] ${line}`);

/**
 * Processes that each alternate `busy` ms of computation with `idle` ms of sleep: the shape of a
 * harness and a guard handling streamed tokens, and of the agent's short tool calls.
 */
function startLoad(count: number, busyMs: number, idleMs: number) {
  const script = `
    const spin = (ms) => { const end = performance.now() + ms; let x = 0; while (performance.now() < end) x += Math.sqrt(x + 1); return x; };
    const tick = () => { spin(${busyMs}); setTimeout(tick, ${idleMs}); };
    tick();`;
  return Array.from({ length: count }, () => spawn(process.execPath, ["-e", script], { stdio: "ignore" }));
}

async function decodeRate(target: Target): Promise<number> {
  const rates: number[] = [];
  for (let i = 0; i < repeats; i++) rates.push((await concurrentDecode(target, streams, tokens)).rate);
  return median(rates);
}

async function main(): Promise<void> {
  const data = mkdtempSync(join(tmpdir(), "bridle-contention-"));
  const config = benchConfig(data);
  say(`starting vLLM as the stack starts it (log: ${join(data, "vllm.log")})`);
  const engine = await startEngine(config, data);
  const load: ReturnType<typeof startLoad> = [];
  try {
    const target: Target = { url: config.vllmUrl, model: config.modelName };
    await streamedDecode(target, 8);
    const shape = `${values.load} processes, each ${values["busy-ms"]} ms busy then ${values["idle-ms"]} ms idle`;
    say(`${streams} concurrent streams of ${tokens} tokens, median of ${repeats}`);
    const quiet = await decodeRate(target);
    say(`  quiet machine: ${quiet.toFixed(1)} tok/s`);
    load.push(...startLoad(Number(values.load), Number(values["busy-ms"]), Number(values["idle-ms"])));
    const same = await decodeRate(target);
    say(`  beside ${shape}, same priority: ${same.toFixed(1)} tok/s`);
    const lowered: [number, number][] = [];
    for (const nice of niceness) {
      for (const child of load) setPriority(child.pid!, nice);
      const rate = await decodeRate(target);
      lowered.push([nice, rate]);
      say(`  beside the same load at nice ${nice}: ${rate.toFixed(1)} tok/s`);
    }
    console.log("");
    console.log("| model server | aggregate decode | vs quiet |");
    console.log("| --- | --- | --- |");
    console.log(`| quiet machine | ${quiet.toFixed(1)} tok/s | 1.00x |`);
    console.log(`| load at the same priority | ${same.toFixed(1)} tok/s | ${(same / quiet).toFixed(2)}x |`);
    for (const [nice, rate] of lowered)
      console.log(`| load at nice ${nice} | ${rate.toFixed(1)} tok/s | ${(rate / quiet).toFixed(2)}x |`);
    console.log(`load: ${shape}; ${streams} streams x ${tokens} tokens, median of ${repeats}`);
  } finally {
    for (const child of load) child.kill("SIGKILL");
    await engine.stop();
    rmSync(data, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(`bench failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
