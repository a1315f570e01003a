/**
 * `pnpm bench`: figures side by side with a baseline measured in the same run.
 *   1. Reload latency: adapter saved -> serving and verified (validation, vLLM load, canary) through
 *      the serving service, median of 10, vs a bare vLLM load plus the first request that uses it.
 *   2. Training throughput: the trainer's GRPO step vs a plain PEFT loop on the same batch.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdapterVersion } from "@bridle/contracts";
import { callJson, repoRoot } from "@bridle/service-kit";
import { loadStackConfig, type Running, stackComponents, startComponent } from "@bridle/stack";
import { z } from "zod";

const home = process.env.BRIDLE_HOME ?? join(repoRoot, ".bridle");
const python = join(home, "venv", "bin", "python");
const modelDir = join(home, "models", "smollm2-135m-instruct");
const cwd = join(repoRoot, "services", "trainer", "python");
const pyEnv = { ...process.env, PYTHONPATH: cwd, HF_HUB_OFFLINE: "1", TRANSFORMERS_OFFLINE: "1" };
const RELOADS = 10;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const row = (label: string, value: string) => console.log(`  ${label.padEnd(46)} ${value}`);

async function reloadLatency(data: string): Promise<void> {
  const adapters = join(data, "adapters");
  execFileSync(
    python,
    ["-m", "bridle_trainer.make_adapter", "--model", modelDir, "--out", adapters, "--count", String(RELOADS)],
    { cwd, env: pyEnv, stdio: "ignore" },
  );
  const config = loadStackConfig({
    BRIDLE_MODEL: "smollm2-135m", // the adapters here are made for the smallest model
    BRIDLE_HOME: home,
    BRIDLE_DATA: data,
    BRIDLE_PORT_BASE: "19650",
    BRIDLE_VLLM_PORT: "19685",
    LOG_LEVEL: "warn",
  });
  const running: Running[] = [];
  try {
    for (const name of ["vllm", "serving"]) {
      running.push(await startComponent(stackComponents(config).find((c) => c.name === name)!, data));
    }
    const serving = `http://${config.host}:${config.ports.serving}`;
    const ours: number[] = [];
    const bare: number[] = [];
    for (let i = 0; i < RELOADS; i++) {
      const path = `${adapters}-${i}`;
      // Baseline: what any reload pays before the adapter answers (vLLM loads its weights on first use).
      let started = performance.now();
      await callJson(`${config.vllmUrl}/v1/load_lora_adapter`, {
        schema: z.unknown(),
        body: { lora_name: `bare-${i}`, lora_path: path },
        timeoutMs: 120_000,
      });
      await callJson(`${config.vllmUrl}/v1/completions`, {
        schema: z.unknown(),
        body: { model: `bare-${i}`, prompt: "Hello", max_tokens: 1, temperature: 0 },
        timeoutMs: 120_000,
      });
      bare.push(performance.now() - started);
      await callJson(`${config.vllmUrl}/v1/unload_lora_adapter`, {
        schema: z.unknown(),
        body: { lora_name: `bare-${i}` },
      });
      started = performance.now();
      const submitted = await callJson(`${serving}/v1/adapters/smollm2/bench/reload/versions`, {
        schema: AdapterVersion,
        body: { path, step: i + 1 },
      });
      const v = await callJson(
        `${serving}/v1/adapters/smollm2/bench/reload/versions/${submitted.version}?wait=true`,
        { schema: AdapterVersion, timeoutMs: 120_000 },
      );
      ours.push(performance.now() - started);
      if (v.state !== "serving") throw new Error(`version ${v.version} is ${v.state}`);
    }
    console.log(`\nReload latency (CPU vLLM, rank-8 adapters on 7 modules, median of ${RELOADS})`);
    row("saved -> serving + canary-verified (serving)", `${(median(ours) / 1000).toFixed(2)} s`);
    row("bare vLLM load + first request (baseline)", `${(median(bare) / 1000).toFixed(2)} s`);
    row("ratio (serving / bare)", `${(median(ours) / median(bare)).toFixed(2)}x  (target: under 3 s)`);
  } finally {
    for (const component of running.reverse()) await component.stop();
  }
}

/**
 * The trainer on the embedded default (BRIDLE_MODEL, 0.5B unless set) with harness-sized sequences,
 * in each number format, against a plain PEFT loop in the same format and process.
 */
function throughput(precision: "fp32" | "bf16"): void {
  const model = loadStackConfig({ ...process.env, BRIDLE_HOME: home });
  const args = ["-m", "bridle_trainer.bench", "--model", model.modelDir, "--precision", precision];
  const shape = ["--batch", "2", "--prompt-tokens", "896", "--completion-tokens", "128", "--repeats", "2"];
  const out = execFileSync(python, [...args, ...shape], {
    cwd,
    env: pyEnv,
    stdio: ["ignore", "pipe", "ignore"],
    encoding: "utf8",
  });
  const f = JSON.parse(out.trim().split("\n").at(-1)!) as Record<string, number | string>;
  const n = (k: string) => Number(f[k]);
  console.log(
    `\nTraining throughput, ${model.model.key} ${f.precision} (${f.device}; ${f.sequences} sequences x ${f.tokensPerSequence} tokens, ${f.iterations} iterations, median of ${f.repeats})`,
  );
  row(
    "trainer step (validation + atomic save included)",
    `${n("trainerTokensPerSecond").toFixed(1)} tok/s   ${n("trainerTokensPerCpuSecond").toFixed(1)} tok/CPU-s`,
  );
  row(
    "trainer optimiser loop alone (same work as plain)",
    `${n("trainerLoopTokensPerSecond").toFixed(1)} tok/s`,
  );
  row(
    "plain PEFT loop (baseline)",
    `${n("plainTokensPerSecond").toFixed(1)} tok/s   ${n("plainTokensPerCpuSecond").toFixed(1)} tok/CPU-s`,
  );
  row(
    "ratio (whole step / plain)",
    `${(n("trainerTokensPerSecond") / n("plainTokensPerSecond")).toFixed(2)}x wall   ${(n("trainerTokensPerCpuSecond") / n("plainTokensPerCpuSecond")).toFixed(2)}x CPU`,
  );
  row(
    "ratio (trainer loop / plain)",
    `${(n("trainerLoopTokensPerSecond") / n("plainTokensPerSecond")).toFixed(2)}x wall  (target: >= 0.9x)`,
  );
  if (f.device !== "cuda")
    console.log("  (no GPU on this machine: run `pnpm bench` on a CUDA host for the GPU figure)");
}

const data = mkdtempSync(join(tmpdir(), "bridle-bench-"));
try {
  await reloadLatency(data);
  throughput("fp32");
  throughput("bf16");
} finally {
  rmSync(data, { recursive: true, force: true });
}
