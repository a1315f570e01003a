/**
 * Soak of repeated faults: the model server is killed five times (SIGKILL to vLLM's API server)
 * during one training run. Prints, after each restart, the stack's resident memory and the number
 * of model-server engines, and checks: the run completes with exactly its configured steps, the
 * stack's memory after the last restart is within 10% of what it was before the first kill, and
 * there is exactly one engine. Too long for the suite (10-20 minutes on 2 cores): `pnpm soak` in test/.
 *
 * The run trains on the qa-random-credit fixture, whose verifier is a TEST DOUBLE for partial
 * credit, so its steps train and load adapter versions (see faults.test.ts).
 */
import { readFileSync, rmSync } from "node:fs";
import { callJson } from "@bridle/service-kit";
import { down, stackProcesses, status, up } from "@bridle/stack";
import { z } from "zod";
import { ownStack, RunView, say, sleep } from "./stack.ts";

const KILLS = 5;
const STEPS = 8;
const { config, gateway, headers } = ownStack("soak", 30);
const view = () => callJson(`${gateway}/v1/runs/soak`, { schema: RunView, headers }).catch(() => undefined);

/** Resident memory of every process of the stack, in MiB, and its model-server engines. */
function measure() {
  const processes = stackProcesses(config.data);
  let kib = 0;
  for (const p of processes) {
    try {
      kib += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p.pid}/status`, "utf8"))?.[1] ?? 0);
    } catch {
      // gone meanwhile
    }
  }
  const engines = processes.filter((p) => p.command.includes("EngineCore")).length;
  return { rssMib: Math.round(kib / 1024), engines, processes: processes.length };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(1_000);
  }
}

const vllm = async () => (await status(config)).components.find((c) => c.name === "vllm")!;

async function main(): Promise<number> {
  await down(config);
  rmSync(config.data, { recursive: true, force: true });
  await up(config, (line) => say(`[stack] ${line}`));
  const imported = await callJson(`http://${config.host}:${config.ports.tasks}/v1/tasks/import`, {
    schema: z.object({ verdicts: z.array(z.object({ ok: z.boolean() })) }),
    body: { path: new URL("../fixtures/tasks/qa-random-credit", import.meta.url).pathname },
    timeoutMs: 300_000,
  });
  if (!imported.verdicts.every((v) => v.ok)) throw new Error("the fixture task did not import");
  await callJson(`${gateway}/v1/runs`, {
    schema: z.unknown(),
    headers,
    body: {
      name: "soak",
      steps: STEPS,
      batchSize: 1,
      groupSize: 2,
      tasks: ["qa-random-credit"],
      agentTimeoutSec: 150,
      maxTurns: 1,
      contextWindow: 8192,
      concurrency: 2,
    },
  });
  // The baseline is the stack in its steady state: the first step trained (the trainer worker has
  // loaded its model and run a step) and the first adapter version served.
  await until(
    "the first training step",
    async () => ((await view())?.progress?.metrics.length ?? 0) >= 1 || undefined,
    900_000,
  );
  const before = measure();
  const rows = [{ at: "before the first kill", ...before }];
  say(
    `before the first kill: ${before.rssMib} MiB in ${before.processes} processes, ${before.engines} engine(s)`,
  );
  for (let kill = 1; kill <= KILLS; kill++) {
    const server = await vllm();
    if ((await view())?.status !== "RUNNING") {
      say(`the run ended before kill ${kill}`);
      break;
    }
    process.kill(server.pid!, "SIGKILL");
    await until(
      `vLLM to come back after kill ${kill}`,
      async () => {
        const s = await vllm();
        return s.restarts > server.restarts && s.healthy ? true : undefined;
      },
      600_000,
    );
    // Let the run use the new server for a while (a rollout or two) before the next kill.
    const done = (await view())?.progress?.rolloutsDone ?? 0;
    await until(
      "a rollout on the new server",
      async () => {
        const v = await view();
        return (v?.progress?.rolloutsDone ?? 0) > done || v?.status !== "RUNNING" ? true : undefined;
      },
      600_000,
    );
    const now = measure();
    rows.push({ at: `after restart ${kill}`, ...now });
    say(`after restart ${kill}: ${now.rssMib} MiB in ${now.processes} processes, ${now.engines} engine(s)`);
  }
  const last = rows.at(-1)!;
  const done = await until(
    "the run to finish",
    async () => {
      const v = await view();
      return v && v.status !== "RUNNING" ? v : undefined;
    },
    3_600_000,
  );
  const { leftovers } = await down(config);
  console.table(rows);
  const ratio = last.rssMib / before.rssMib;
  const checks = {
    [`the run completed with its ${STEPS} steps`]:
      done.status === "COMPLETED" &&
      JSON.stringify(done.progress?.metrics.map((m) => m.step)) ===
        JSON.stringify(Array.from({ length: STEPS }, (_, i) => i + 1)),
    [`${rows.length - 1} kills survived (${KILLS} planned)`]: rows.length - 1 === KILLS,
    [`memory after the last restart / before the first kill = ${ratio.toFixed(3)} (within 10%)`]:
      Math.abs(ratio - 1) <= 0.1,
    [`model-server engines after the last restart: ${last.engines} (exactly one)`]: last.engines === 1,
    [`processes left after down: ${leftovers.length}`]: leftovers.length === 0,
  };
  for (const [what, ok] of Object.entries(checks)) say(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (done.failure) say(`run failure: ${done.failure}`);
  const ok = Object.values(checks).every(Boolean);
  // A failed soak keeps its data folder (logs, Temporal's history) for whoever looks into it.
  if (ok) rmSync(config.data, { recursive: true, force: true });
  else say(`kept for inspection: ${config.data}`);
  return ok ? 0 : 1;
}

process.exitCode = await main();
