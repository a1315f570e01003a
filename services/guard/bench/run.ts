/**
 * The guard's benchmark: a local upstream (the scripted TEST DOUBLE for vLLM) streams a canned
 * completion with tool calls as fast as it can; the same load runs directly against it, through
 * the guard, and through LiteLLM's proxy, at 1, 64 and 256 concurrent streams; and, as the floor
 * under any Node proxy, through a byte pipe that parses nothing (bench/passthrough.ts). A shorter scenario
 * paces the upstream at 5 ms per chunk, as a model generating tokens would. Figures are printed
 * side by side, as ratios to the direct connection measured in this run, with the CPU time each
 * process spent per answer (from /proc), so the proxy's own cost reads apart from CPU contention.
 *
 * Two tables: "shared", where the load generator, the upstream and the proxy compete for all
 * cores; and "pinned" (taskset), where the load generator and the upstream share one core and the
 * proxy has the other cores to itself, as the guard beside a GPU server would. The guard runs once
 * per entry of --workers (GUARD_WORKERS: one process, or a primary and N workers on one port);
 * by default 1 and 2, and on a machine with 5 or more CPUs also as many workers as it can give the
 * guard besides the load generator and the upstream (at most 4). The one-process guard runs twice:
 * "guard" with its effects cache (the canned answer's tool calls repeat, so after the first answer
 * they are judged without parsing) and "guard-nc" without it (every call parsed, as a call never
 * seen before).
 *
 *   pnpm bench [-- --seconds 4 --warmup 2 --levels 1,64,256 --paced-levels 256
 *                  --pinned-levels 1,64,256 --workers 1,2 --skip-litellm]
 */
import { availableParallelism } from "node:os";
import { parseArgs } from "node:util";
import { type RunningProcess, spawnScriptedUpstream } from "@bridle/testkit";
import { currentCpus, pin, settle, tasksetAvailable } from "./cpu.ts";
import { LITELLM_KEY, startLiteLLM } from "./litellm.ts";
import { type LoadTarget, runLoad } from "./load.ts";
import { formatRow, HEADER, type Row, verdicts } from "./report.ts";
import { canned, PORTS, requestBody, scriptArgs, startGuard, startPassthrough } from "./setup.ts";

function defaultWorkers(): string {
  const cpus = availableParallelism();
  return cpus >= 5 ? `1,2,${Math.min(cpus - 2, 4)}` : "1,2";
}

const { values } = parseArgs({
  args: scriptArgs(),
  options: {
    seconds: { type: "string", default: "4" },
    warmup: { type: "string", default: "2" },
    levels: { type: "string", default: "1,64,256" },
    "paced-levels": { type: "string", default: "256" },
    "pinned-levels": { type: "string", default: "1,64,256" },
    workers: { type: "string", default: defaultWorkers() },
    "skip-litellm": { type: "boolean", default: false },
  },
});
const seconds = Number(values.seconds);
const warmup = Number(values.warmup);
const list = (text: string) => (text ? text.split(",").map(Number) : []);
const say = (line: string) => process.stdout.write(`${line}\n`);
const running: RunningProcess[] = [];

/** A target of one scenario: `proxy` is the process between load and upstream (none for direct). */
interface Target {
  name: string;
  target: LoadTarget;
  proxy?: number;
}

/** Runs every target at each level; each row is compared with the direct run just before it. */
async function table(
  scenario: string,
  levels: number[],
  upstream: number,
  targets: Target[],
): Promise<Row[]> {
  const rows: Row[] = [];
  for (const level of levels) {
    let direct: Row["direct"] | undefined;
    for (const { name, target, proxy } of targets) {
      const watched = proxy ? [upstream, proxy] : [upstream];
      const result = await runLoad(target, level, seconds, warmup, watched);
      if (!(await settle(watched)))
        say(`  (${name} was still busy 90 s after its run: the next run shares the CPU with it)`);
      direct ??= result;
      // No answer completed (a proxy slower than the window): no per-answer figure to give.
      const perAnswer = (s: number | undefined) =>
        s === undefined || result.cpu.answers === 0 ? undefined : (s * 1000) / result.cpu.answers;
      const row: Row = {
        scenario,
        level,
        name,
        result,
        direct,
        cpu: {
          loadgen: perAnswer(result.cpu.self),
          upstream: perAnswer(result.cpu.seconds[0]),
          proxy: proxy ? perAnswer(result.cpu.seconds[1]) : undefined,
        },
      };
      rows.push(row);
      say(formatRow(row));
    }
  }
  return rows;
}

/**
 * The pinned table's CPUs: the first this process may use (load generator and upstream) and the
 * rest as a taskset list (the proxies), or why there are not two.
 */
function pinnedCpus(): [string, string] | string {
  const available = tasksetAvailable();
  if (available !== true) return available;
  const cpus = currentCpus()
    .split(",")
    .flatMap((part) => {
      const [from, to = from] = part.split("-").map(Number);
      return Array.from({ length: to! - from! + 1 }, (_, i) => String(from! + i));
    });
  return cpus.length >= 2 ? [cpus[0]!, cpus.slice(1).join(",")] : `only CPU ${cpus.join(",")} is available`;
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
  const direct = (url: string): Target => ({
    name: "direct",
    target: { url: `${url}/v1/chat/completions`, headers: {}, body: requestBody("bench") },
  });
  const pipe = await startPassthrough(PORTS.passthrough, fast.url);
  const pacedPipe = await startPassthrough(PORTS.pacedPassthrough, paced.url);
  running.push(pipe.process, pacedPipe.process);
  const fastTargets: Target[] = [direct(fast.url), { name: "pipe", target: pipe.target, proxy: pipe.pid }];
  const pacedTargets: Target[] = [
    direct(paced.url),
    { name: "pipe", target: pacedPipe.target, proxy: pacedPipe.pid },
  ];
  const proxies: number[] = [pipe.pid, pacedPipe.pid];
  let port = PORTS.guard;
  for (const workers of list(values.workers)) {
    // "guard" is one process; "guard×N" a primary and N workers on one port.
    const name = workers === 1 ? "guard" : `guard×${workers}`;
    const guard = await startGuard(port++, fast.url, { workers });
    const pacedGuard = await startGuard(port++, paced.url, { workers });
    running.push(guard.process, pacedGuard.process);
    fastTargets.push({ name, target: guard.target, proxy: guard.pid });
    pacedTargets.push({ name, target: pacedGuard.target, proxy: pacedGuard.pid });
    proxies.push(guard.pid);
    if (workers === 1) {
      // The canned answer repeats its two tool calls, so the guard above judges them from its
      // effects cache after the first answer; this one parses every call, as for calls never seen.
      const uncached = { workers, env: { GUARD_EFFECTS_CACHE: "0" } };
      const fresh = await startGuard(port++, fast.url, uncached);
      const pacedFresh = await startGuard(port++, paced.url, uncached);
      running.push(fresh.process, pacedFresh.process);
      fastTargets.push({ name: "guard-nc", target: fresh.target, proxy: fresh.pid });
      pacedTargets.push({ name: "guard-nc", target: pacedFresh.target, proxy: pacedFresh.pid });
      proxies.push(fresh.pid);
    }
  }
  if (values["skip-litellm"]) say("LiteLLM: skipped (--skip-litellm)");
  else {
    say("starting LiteLLM's proxy (the first run installs it into its own venv)...");
    const litellm = await startLiteLLM({ bench: fast.url, "bench-paced": paced.url }, PORTS.litellm);
    if ("unavailable" in litellm) say(`LiteLLM: NOT MEASURED, ${litellm.unavailable}`);
    else {
      running.push(litellm);
      const url = `http://127.0.0.1:${PORTS.litellm}/v1/chat/completions`;
      const headers = { authorization: `Bearer ${LITELLM_KEY}` };
      const pid = litellm.child.pid!;
      proxies.push(pid);
      fastTargets.push({ name: "litellm", target: { url, headers, body: requestBody("bench") }, proxy: pid });
      pacedTargets.push({
        name: "litellm",
        target: { url, headers, body: requestBody("bench-paced") },
        proxy: pid,
      });
    }
  }

  say("\nSHARED CPUs: load generator, upstream and proxy compete for the same cores");
  say(HEADER);
  const shared = [
    ...(await table("fast", list(values.levels), fast.child.pid!, fastTargets)),
    ...(await table("paced", list(values["paced-levels"]), paced.child.pid!, pacedTargets)),
  ];

  let pinned: Row[] = [];
  const cpus = pinnedCpus();
  const pinnedLevels = list(values["pinned-levels"]);
  if (pinnedLevels.length === 0) say("\nPINNED: skipped (--pinned-levels is empty)");
  else if (typeof cpus === "string") say(`\nPINNED: skipped, ${cpus}`);
  else {
    const all = currentCpus();
    say(
      `\nPINNED (taskset): load generator and upstream on CPU ${cpus[0]}, the proxy on CPU ${cpus[1]} (as beside a GPU server)`,
    );
    say(HEADER);
    // The load generator is this process: pinning it in place (all its threads, `taskset -a`)
    // keeps one load generator for both tables; every affinity is restored afterwards.
    pin(process.pid, cpus[0], false);
    pin(fast.child.pid!, cpus[0]);
    for (const pid of proxies) pin(pid, cpus[1]);
    try {
      pinned = await table("pinned", pinnedLevels, fast.child.pid!, fastTargets);
    } finally {
      for (const pid of [process.pid, fast.child.pid!, ...proxies]) pin(pid, all, pid !== process.pid);
    }
  }

  say("\nSHARED CPUs");
  say(HEADER);
  for (const row of shared) say(formatRow(row));
  if (pinned.length > 0) {
    say(`\nPINNED: load generator + upstream on one core, the proxy on the others`);
    say(HEADER);
    for (const row of pinned) say(formatRow(row));
  }
  say("");
  say(
    "counted: requests completed inside the measured window (req/s); p50/p99: of the requests started in it; NaN: none",
  );
  say("guard-nc: the guard without its effects cache (GUARD_EFFECTS_CACHE=0), judging every tool call anew");
  say("CPU ms/answer: user+system CPU of each process over the window / answers completed in it;");
  say(
    "  upstream and proxy from /proc/<pid>/stat, loadgen is this process; proxy answers/s per core = 1000 / proxy ms",
  );
  say(
    "targets: guard >= 0.90x direct throughput at 256 streams, < 5 ms added p99, ahead of LiteLLM, CPU per answer <= 1.5x the byte pipe",
  );
  for (const line of [
    ...verdicts(
      "shared CPUs, fast upstream",
      shared.filter((r) => r.scenario === "fast"),
    ),
    ...verdicts(
      "shared CPUs, paced upstream",
      shared.filter((r) => r.scenario === "paced"),
    ),
    ...verdicts("pinned", pinned),
  ])
    say(line);
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
