/**
 * Profiles the guard under the benchmark's load: starts the scripted upstream (TEST DOUBLE for the
 * model server) and the guard with `--cpu-prof`, runs the canned answer at one concurrency, stops
 * the guard (which writes its profile on exit) and prints the functions with the most self time.
 *
 *   pnpm bench:profile [-- --concurrency 64 --seconds 6 --top 30 --paced]
 */
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { spawnScriptedUpstream } from "@bridle/testkit";
import { runLoad } from "./load.ts";
import { canned, PORTS, scriptArgs, startGuard } from "./setup.ts";

const { values } = parseArgs({
  args: scriptArgs(),
  options: {
    concurrency: { type: "string", default: "64" },
    seconds: { type: "string", default: "6" },
    top: { type: "string", default: "30" },
    // The upstream waits 5 ms between events, as a model generating tokens would.
    paced: { type: "boolean", default: false },
  },
});

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Self time per function (name + file:line), in milliseconds, largest first. */
export function selfTimes(profile: CpuProfile): { name: string; ms: number; share: number }[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, number>();
  let all = 0;
  profile.samples.forEach((id, i) => {
    const node = byId.get(id);
    const us = profile.timeDeltas[i] ?? 0;
    if (!node) return;
    const { functionName, url, lineNumber, columnNumber } = node.callFrame;
    const file = url.split("/").slice(-2).join("/");
    const key =
      `${functionName || "(anonymous)"} ${file ? `${file}:${lineNumber + 1}:${columnNumber + 1}` : ""}`.trim();
    totals.set(key, (totals.get(key) ?? 0) + us);
    all += us;
  });
  return [...totals.entries()]
    .map(([name, us]) => ({ name, ms: us / 1000, share: us / all }))
    .sort((a, b) => b.ms - a.ms);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bridle-guard-prof-"));
  const turn = values.paced ? { ...canned, delay_ms: 5 } : canned;
  const upstream = await spawnScriptedUpstream([turn], { port: PORTS.upstream, record: false });
  const guard = await startGuard(PORTS.guard, upstream.url, {
    nodeArgs: ["--cpu-prof", "--cpu-prof-dir", dir],
  });
  try {
    const r = await runLoad(guard.target, Number(values.concurrency), Number(values.seconds), 1);
    process.stdout.write(
      `load: ${r.perSecond.toFixed(0)} req/s, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms\n`,
    );
  } finally {
    await guard.process.stop();
    await upstream.stop();
  }
  const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
  if (!file) throw new Error(`the guard wrote no profile into ${dir}`);
  const rows = selfTimes(JSON.parse(readFileSync(join(dir, file), "utf8")) as CpuProfile);
  process.stdout.write(`profile: ${join(dir, file)}\n  self ms   share  function\n`);
  for (const row of rows.slice(0, Number(values.top))) {
    process.stdout.write(
      `${row.ms.toFixed(0).padStart(8)} ${(row.share * 100).toFixed(1).padStart(6)}%  ${row.name}\n`,
    );
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`profile failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
