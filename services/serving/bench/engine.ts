/**
 * vLLM for the benchmark, started from the stack launcher's own component definition (so the figures
 * are the stack's), and stopped so that no engine process outlives the run.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { repoRoot } from "@bridle/service-kit";
import {
  loadStackConfig,
  type Running,
  type StackConfig,
  stackComponents,
  startComponent,
} from "@bridle/stack";

/** The install the benchmarks use: BRIDLE_HOME when set, else the repository's own. */
export const benchHome = process.env.BRIDLE_HOME ?? join(repoRoot, ".bridle");
/** The install's Python (vLLM, torch, the trainer's package). */
export const benchPython = join(benchHome, "venv", "bin", "python");
const trainerDir = join(repoRoot, "services", "trainer", "python");

/** Writes a random rank-8 PEFT adapter for the model (on `targets`, else the trainer's modules). */
export function makeAdapter(modelDir: string, out: string, targets?: string): string {
  const args = ["-m", "bridle_trainer.make_adapter", "--model", modelDir, "--out", out, "--count", "1"];
  if (targets) args.push("--targets", targets);
  execFileSync(benchPython, args, {
    cwd: trainerDir,
    env: { ...process.env, PYTHONPATH: trainerDir, HF_HUB_OFFLINE: "1" },
    stdio: "ignore",
  });
  return out;
}

/** The stack settings of a benchmark's vLLM: its own ports and data folder, the chosen model. */
export function benchConfig(data: string): StackConfig {
  return loadStackConfig({
    BRIDLE_HOME: benchHome,
    BRIDLE_DATA: data,
    BRIDLE_PORT_BASE: "19750",
    BRIDLE_VLLM_PORT: "19785",
    LOG_LEVEL: "warn",
    ...(process.env.BRIDLE_MODEL ? { BRIDLE_MODEL: process.env.BRIDLE_MODEL } : {}),
  });
}

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

/** A process as /proc names it: the start time tells a live process from a recycled pid. */
interface Proc {
  pid: number;
  ppid: number;
  started: string;
}

function readProc(pid: number): Proc | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which may itself hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] === "Z") return undefined; // a zombie holds no memory and no port
    return { pid, ppid: Number(fields[1]), started: fields[19] ?? "" };
  } catch {
    return undefined;
  }
}

const commandLine = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
};

/** SIGKILL to a pid (or, negative, a process group) that may be gone already. */
const kill = (target: number) => {
  try {
    process.kill(target, "SIGKILL");
  } catch {
    // gone in the meantime
  }
};

/** Every live descendant of `root`: vLLM's engine core and its workers are child processes. */
function descendants(root: number): Proc[] {
  const all = readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map((name) => readProc(Number(name)))
    .filter((p): p is Proc => p !== undefined);
  const found: Proc[] = [];
  let parents = new Set([root]);
  while (parents.size > 0) {
    const children = all.filter((p) => parents.has(p.ppid));
    found.push(...children);
    parents = new Set(children.map((p) => p.pid));
  }
  return found;
}

export interface Engine {
  /** Stops vLLM cleanly; resolves to the engine processes that had to be killed afterwards. */
  stop(): Promise<number[]>;
}

/**
 * Starts only the stack's "vllm" component of `config`, logging into `logDir`; `env` adds to or
 * overrides the component's environment (a benchmark's baseline arm).
 */
export async function startEngine(
  config: StackConfig,
  logDir: string,
  env: Record<string, string> = {},
): Promise<Engine> {
  const found = stackComponents(config).find((c) => c.name === "vllm");
  if (!found) throw new Error("the stack defines no vllm component (is BRIDLE_VLLM_URL set?)");
  const component = { ...found, env: { ...found.env, ...env } };
  // startComponent trusts the health URL: a server already on the port would be benchmarked instead.
  if (await portTaken(config.host, config.ports.vllm)) {
    throw new Error(`port ${config.ports.vllm} is taken; set BRIDLE_VLLM_PORT to a free one`);
  }
  let running: Running;
  try {
    running = await startComponent(component, logDir, component.startTimeoutMs);
  } catch (err) {
    // A server that never got healthy is still running, detached in its own process group.
    const marker = `--port\0${config.ports.vllm}\0`;
    for (const p of descendants(process.pid)) {
      if (commandLine(p.pid).includes(marker)) kill(-p.pid);
    }
    throw err;
  }
  let stopped: Promise<number[]> | undefined;
  const stop = async () => {
    // Taken before the stop: once the server exits, an orphaned engine core is no longer its child.
    const family = [readProc(running.pid), ...descendants(running.pid)].filter((p) => p !== undefined);
    await running.stop();
    const alive = () => family.filter((p) => readProc(p.pid)?.started === p.started);
    const deadline = Date.now() + 15_000;
    while (alive().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const left = alive();
    for (const p of left) kill(p.pid);
    return left.map((p) => p.pid);
  };
  return {
    stop: () => {
      stopped ??= stop();
      return stopped;
    },
  };
}

function portTaken(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(true));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(false)));
  });
}
