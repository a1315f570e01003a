import { existsSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/** Where cgroup v1 controllers are mounted. */
const ROOT = "/sys/fs/cgroup";
const CONTROLLERS = ["pids", "memory", "freezer", "cpu"] as const;
type Controller = (typeof CONTROLLERS)[number];

let available: Controller[] | undefined;

/** The cgroup v1 controllers this process may manage (probed once by creating a test group). */
export async function cgroupControllers(): Promise<Controller[]> {
  if (available) return available;
  const found: Controller[] = [];
  for (const controller of CONTROLLERS) {
    const probe = join(ROOT, controller, "bridle", `probe-${process.pid}`);
    try {
      await mkdir(probe, { recursive: true });
      await rmdir(probe);
      found.push(controller);
    } catch {
      // Not mounted, read-only or cgroup v2: the sandbox falls back to namespaces and rlimits.
    }
  }
  available = found;
  return found;
}

/** Whether `pid` names a live process (a zombie counts as gone). */
export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

export interface CgroupLimits {
  memoryMb?: number | undefined;
  maxPids?: number | undefined;
  /** CPU time per wall-clock second, in CPUs (0.5 = half a core), through the CFS quota. */
  cpus?: number | undefined;
}

/**
 * One sandbox run's cgroups: a pids limit (fork bombs), a memory limit (tmpfs pages included), a CPU
 * quota, and a freezer, so that every process can be killed at once, even one that keeps forking.
 */
export class Cgroup {
  private constructor(
    readonly name: string,
    private readonly controllers: Controller[],
  ) {}

  static async create(name: string, limits: CgroupLimits): Promise<Cgroup> {
    const controllers = await cgroupControllers();
    const group = new Cgroup(name, controllers);
    for (const controller of controllers) await mkdir(group.dir(controller), { recursive: true });
    if (limits.maxPids !== undefined && controllers.includes("pids")) {
      await writeFile(join(group.dir("pids"), "pids.max"), String(limits.maxPids));
    }
    if (limits.memoryMb !== undefined && controllers.includes("memory")) {
      const bytes = String(limits.memoryMb * 1024 * 1024);
      await writeFile(join(group.dir("memory"), "memory.limit_in_bytes"), bytes);
      // Without a swap limit a process could page its way past the memory limit.
      const memsw = join(group.dir("memory"), "memory.memsw.limit_in_bytes");
      if (existsSync(memsw)) await writeFile(memsw, bytes).catch(() => undefined);
    }
    if (limits.cpus !== undefined && controllers.includes("cpu")) {
      const period = 100_000;
      await writeFile(join(group.dir("cpu"), "cpu.cfs_period_us"), String(period));
      await writeFile(
        join(group.dir("cpu"), "cpu.cfs_quota_us"),
        String(Math.max(1_000, Math.round(limits.cpus * period))),
      );
    }
    return group;
  }

  /**
   * The groups that processes now dead left behind: a group's name starts with the pid of the process
   * that made it (see Sandbox), so a runner or verifier killed mid-run is known by its pid. Whatever
   * is still inside is killed and the groups removed. Returns the names of the groups reaped.
   */
  static async reapOrphans(): Promise<string[]> {
    const controllers = await cgroupControllers();
    const names = new Set<string>();
    for (const controller of controllers) {
      const entries = await readdir(join(ROOT, controller, "bridle")).catch(() => [] as string[]);
      for (const name of entries) {
        const owner = /^(\d+)-/.exec(name)?.[1];
        if (owner && Number(owner) !== process.pid && !processAlive(Number(owner))) names.add(name);
      }
    }
    for (const name of names) {
      const group = new Cgroup(name, controllers);
      const left = await group.killAll();
      if (left.length > 0)
        throw new Error(`orphaned sandbox group ${name}: processes ${left.join(", ")} would not die`);
      await group.dispose();
    }
    return [...names];
  }

  private dir(controller: Controller): string {
    return join(ROOT, controller, "bridle", this.name);
  }

  /** Files a process writes its pid into to join every controller (before it forks). */
  procsFiles(): string[] {
    return this.controllers.map((c) => join(this.dir(c), "cgroup.procs"));
  }

  /** Whether the kernel's OOM killer fired inside this group. */
  async oomKilled(): Promise<boolean> {
    if (!this.controllers.includes("memory")) return false;
    const text = await readFile(join(this.dir("memory"), "memory.oom_control"), "utf8").catch(() => "");
    const kills = /oom_kill (\d+)/.exec(text);
    if (kills) return Number(kills[1]) > 0;
    const failcnt = await readFile(join(this.dir("memory"), "memory.failcnt"), "utf8").catch(() => "0");
    return Number(failcnt.trim()) > 0;
  }

  /** The pids still in the group. */
  async pids(): Promise<number[]> {
    const controller = this.controllers.find((c) => c === "pids" || c === "freezer") ?? this.controllers[0];
    if (!controller) return [];
    const text = await readFile(join(this.dir(controller), "cgroup.procs"), "utf8").catch(() => "");
    return text
      .split("\n")
      .filter(Boolean)
      .map(Number)
      .filter((pid) => pid !== process.pid);
  }

  /** Freezes the group, SIGKILLs every member, thaws it so the kills land, until it is empty. */
  async killAll(deadlineMs = 5_000): Promise<number[]> {
    const freezer = this.controllers.includes("freezer") ? join(this.dir("freezer"), "freezer.state") : null;
    const end = Date.now() + deadlineMs;
    let left = await this.pids();
    while (left.length > 0 && Date.now() < end) {
      if (freezer) await writeFile(freezer, "FROZEN").catch(() => undefined);
      for (const pid of left) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
      if (freezer) await writeFile(freezer, "THAWED").catch(() => undefined);
      await sleep(1); // usually only exiting processes are left, gone within a millisecond
      left = await this.pids();
    }
    return left;
  }

  /** Removes the group's directories (they must be empty of processes). */
  async dispose(): Promise<void> {
    for (const controller of this.controllers) {
      // A killed process can linger as a zombie for a while on a busy machine: retry for up to ~5 s.
      for (let attempt = 0, wait = 5; attempt < 40; attempt++, wait = Math.min(wait * 2, 200)) {
        try {
          await rmdir(this.dir(controller));
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === "ENOENT") break;
          await sleep(wait);
        }
      }
    }
  }
}
