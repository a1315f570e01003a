import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

const TICKS_PER_SECOND = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

/** A process and its descendants (LiteLLM's proxy runs its worker as a child), from /proc. */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    const tasks = safe(() => readdirSync(`/proc/${out[i]}/task`), [] as string[]);
    for (const tid of tasks) {
      const children = safe(() => readFileSync(`/proc/${out[i]}/task/${tid}/children`, "utf8"), "");
      for (const child of children.split(" ").filter(Boolean)) out.push(Number(child));
    }
  }
  return out;
}

/** User plus system CPU seconds that `pid` and its descendants have used so far (Linux /proc). */
export function cpuSeconds(pid: number): number {
  let ticks = 0;
  for (const p of processTree(pid)) {
    const stat = safe(() => readFileSync(`/proc/${p}/stat`, "utf8"), "");
    // Fields after the command name (which may hold spaces) start after its closing parenthesis;
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after it.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    ticks += Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
  }
  return ticks / TICKS_PER_SECOND;
}

/** Whether `taskset` (util-linux) can pin processes here; the reason when it cannot. */
export function tasksetAvailable(): true | string {
  const probe = spawnSync("taskset", ["-c", "-p", String(process.pid)], { encoding: "utf8" });
  if (probe.error) return "taskset is not installed (util-linux)";
  if (probe.status !== 0) return `taskset failed: ${probe.stderr.trim()}`;
  return true;
}

/** The CPUs this process may run on now, as taskset's list (e.g. "0,1" or "0-3"). */
export function currentCpus(pid: number = process.pid): string {
  const out = spawnSync("taskset", ["-c", "-p", String(pid)], { encoding: "utf8" }).stdout;
  return out.slice(out.lastIndexOf(":") + 1).trim();
}

/** Pins every thread of `pid`, and of its descendants when `tree`, to `cpus` (a taskset CPU list). */
export function pin(pid: number, cpus: string, tree = true): void {
  for (const p of tree ? processTree(pid) : [pid]) {
    const r = spawnSync("taskset", ["-a", "-c", "-p", cpus, String(p)], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`taskset could not pin ${p} to CPU ${cpus}: ${r.stderr.trim()}`);
  }
}

function safe<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    // The process (or one of its threads) ended between listing and reading: nothing to count.
    return fallback;
  }
}

/**
 * Waits until the processes are nearly idle (under 5% of a core over half a second), at most
 * `maxMs`: a proxy still working off requests the last run abandoned (LiteLLM, at 256 streams,
 * for tens of seconds) would otherwise take CPU from the next run. False when it never settled.
 */
export async function settle(pids: number[], maxMs = 90_000): Promise<boolean> {
  const deadline = Date.now() + maxMs;
  let before = pids.map(cpuSeconds);
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    const now = pids.map(cpuSeconds);
    if (now.every((s, i) => s - (before[i] ?? 0) < 0.025)) return true;
    before = now;
  }
  return false;
}
