/**
 * The guard's benchmark: a local upstream (the scripted TEST DOUBLE for vLLM) streams a canned
 * completion with tool calls as fast as it can; the same load runs directly against it, through
 * the guard, and through LiteLLM's proxy, at 1, 64 and 256 concurrent streams. A second, shorter
 * scenario paces the upstream at 5 ms per chunk, as a model generating tokens would. Figures are
 * printed side by side, as ratios to the direct connection measured in this run.
 *
 *   pnpm bench [-- --seconds 4 --warmup 2 --levels 1,64,256 --paced-levels 64,256 --skip-litellm]
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { httpOk, type RunningProcess, spawnProcess, spawnScriptedUpstream } from "@bridle/testkit";
import { LITELLM_KEY, startLiteLLM } from "./litellm.ts";
import { type LoadResult, type LoadTarget, runLoad } from "./load.ts";

const { values } = parseArgs({
  // pnpm passes a literal `--` through to the script.
  args: process.argv.slice(2).filter((a) => a !== "--"),
  options: {
    seconds: { type: "string", default: "4" },
    warmup: { type: "string", default: "2" },
    levels: { type: "string", default: "1,64,256" },
    "paced-levels": { type: "string", default: "256" },
    "skip-litellm": { type: "boolean", default: false },
  },
});
const seconds = Number(values.seconds);
const warmup = Number(values.warmup);
const list = (text: string) => (text ? text.split(",").map(Number) : []);
const PORTS = { upstream: 19350, pacedUpstream: 19351, guard: 19352, pacedGuard: 19353, litellm: 19354 };

const canned = {
  text: "I will inspect the repository layout first, then read the failing test to see what the date formatter is expected to return.",
  tool_calls: [
    { name: "bash", arguments: { command: "ls -la src tests && git status --short" } },
    { name: "read", arguments: { path: "src/dates.py" } },
  ],
  chunk_chars: 6,
};
const tools = ["bash", "read"].map((name) => ({
  type: "function",
  function: { name, description: name, parameters: { type: "object", properties: {} } },
}));
const requestBody = (model: string) =>
  JSON.stringify({
    model,
    stream: true,
    messages: [{ role: "user", content: "Fix the date formatter in src/dates.py." }],
    tools,
  });

const say = (line: string) => process.stdout.write(`${line}\n`);
const running: RunningProcess[] = [];

async function startGuard(port: number, upstreamUrl: string): Promise<LoadTarget> {
  const url = `http://127.0.0.1:${port}`;
  running.push(
    await spawnProcess(
      process.execPath,
      ["--import", "tsx", fileURLToPath(new URL("../src/main.ts", import.meta.url))],
      {
        env: {
          PORT: String(port),
          UPSTREAM_URL: upstreamUrl,
          GUARD_DATA_DIR: mkdtempSync(join(tmpdir(), "bridle-guard-bench-")),
          LOG_LEVEL: "warn",
        },
        ready: () => httpOk(`${url}/healthz`),
      },
    ),
  );
  const res = await fetch(`${url}/admin/sessions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    // Capture off: the direct baseline asks for no token ids, so neither does the guard here.
    body: JSON.stringify({
      instruction: "Fix the date formatter in src/dates.py.",
      adapter: "bench",
      capture: false,
    }),
  });
  const { apiKey } = (await res.json()) as { apiKey: string };
  return {
    url: `${url}/v1/chat/completions`,
    headers: { authorization: `Bearer ${apiKey}` },
    body: requestBody("bench"),
  };
}

async function main(): Promise<void> {
  say(
    `guard benchmark: ${seconds}s per run after ${warmup}s warm-up; canned answer: text + 2 tool calls in 6-character deltas`,
  );
  const fast = await spawnScriptedUpstream([canned], { port: PORTS.upstream, record: false });
  const paced = await spawnScriptedUpstream([{ ...canned, delay_ms: 5 }], {
    port: PORTS.pacedUpstream,
    record: false,
  });
  running.push(fast, paced);
  const targets = {
    fast: [
      {
        name: "direct",
        target: { url: `${fast.url}/v1/chat/completions`, headers: {}, body: requestBody("bench") },
      },
      { name: "guard", target: await startGuard(PORTS.guard, fast.url) },
    ],
    paced: [
      {
        name: "direct",
        target: { url: `${paced.url}/v1/chat/completions`, headers: {}, body: requestBody("bench") },
      },
      { name: "guard", target: await startGuard(PORTS.pacedGuard, paced.url) },
    ],
  };
  if (values["skip-litellm"]) say("LiteLLM: skipped (--skip-litellm)");
  else {
    say("starting LiteLLM's proxy (the first run installs it into its own venv)...");
    const litellm = await startLiteLLM({ bench: fast.url, "bench-paced": paced.url }, PORTS.litellm);
    if ("unavailable" in litellm) say(`LiteLLM: NOT MEASURED, ${litellm.unavailable}`);
    else {
      running.push(litellm);
      const url = `http://127.0.0.1:${PORTS.litellm}/v1/chat/completions`;
      const headers = { authorization: `Bearer ${LITELLM_KEY}` };
      targets.fast.push({ name: "litellm", target: { url, headers, body: requestBody("bench") } });
      targets.paced.push({ name: "litellm", target: { url, headers, body: requestBody("bench-paced") } });
    }
  }
  const table: string[] = [];
  for (const [scenario, levels] of [
    ["fast", list(values.levels)],
    ["paced", list(values["paced-levels"])],
  ] as const) {
    for (const level of levels) {
      let direct: LoadResult | undefined;
      for (const { name, target } of targets[scenario]) {
        const r = await runLoad(target, level, seconds, warmup);
        direct ??= r;
        const line = [
          scenario.padEnd(6),
          String(level).padStart(5),
          ` ${name.padEnd(8)}`,
          r.perSecond.toFixed(0).padStart(7),
          `${(r.perSecond / direct.perSecond).toFixed(2)}x`.padStart(10),
          r.p50.toFixed(1).padStart(8),
          r.p99.toFixed(1).padStart(8),
          (name === "direct" ? "-" : (r.p99 - direct.p99).toFixed(1)).padStart(13),
          String(r.errors).padStart(7),
          String(r.requests).padStart(7),
        ].join(" ");
        table.push(line);
        say(line);
      }
    }
  }
  say("");
  say("scenario  c   target      req/s  vs direct   p50 ms   p99 ms  added p99 ms  errors  counted");
  for (const line of table) say(line);
  say("");
  say("counted: requests completed inside the measured window; NaN: none completed in it");
  say("targets: guard >= 0.90x direct throughput at 256 streams, < 5 ms added p99, ahead of LiteLLM");
}

const stopAll = async () => {
  for (const p of running.splice(0).reverse()) await p.stop();
};
// Interrupted: stop the processes this run started before leaving.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void stopAll().finally(() => process.exit(130)));
}

main()
  .catch((err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  })
  .finally(stopAll);
