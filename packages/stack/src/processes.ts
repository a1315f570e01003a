import { execFile } from "node:child_process";
import { appendFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { STACK_MARK } from "@bridle/service-kit";
import type { Health } from "./components.ts";

const execFileAsync = promisify(execFile);

/** Whether a process with this pid exists (and is not a zombie we could still reap). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\d+ \(.*\) Z /.test(stat);
  } catch {
    return true;
  }
}

export function readPid(file: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(file, "utf8").trim(), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

export function writePid(file: string, pid: number): void {
  writeFileSync(file, `${pid}\n`);
}

export function removeFile(file: string): void {
  rmSync(file, { force: true });
}

/** The command line of a live process, to tell our own process from a recycled pid. */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return "";
  }
}

/** Sends a signal to a whole process group (our components run in their own), then to the pid. */
export function signalGroup(pid: number, signal: NodeJS.Signals): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, signal);
    } catch {
      // already gone
    }
  }
}

/** SIGTERM, then SIGKILL after a grace period; resolves when the process is gone. */
export async function stopProcess(pid: number, graceMs = 10_000): Promise<void> {
  signalGroup(pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (isAlive(pid) && Date.now() < deadline) await sleep(100);
  if (isAlive(pid)) signalGroup(pid, "SIGKILL");
  while (isAlive(pid)) await sleep(50);
  // What is left of its group (vLLM's engine core) dies too, and is waited for.
  await reapGroup(pid, 10_000);
}

/** A process's session id and start time (clock ticks after boot), from /proc/<pid>/stat. */
export function sessionOf(pid: number): { session: number; start: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces): state is field 3, session field 6,
    // starttime field 22.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { session: Number(fields[3]), start: Number(fields[19]) };
  } catch {
    return undefined;
  }
}

/** The file where a stack lists the sessions its components were started in (see stackProcesses). */
export const sessionsFile = (stackId: string) => join(stackId, "run", "sessions");

/**
 * Records that a component was started in its own session (a detached child: its pid is its
 * session id), with the leader's start time, so a recycled pid is never taken for it.
 */
export function recordSession(stackId: string, pid: number): void {
  const own = sessionOf(pid);
  if (own === undefined) return; // already gone: nothing of it to find later
  mkdirSync(dirname(sessionsFile(stackId)), { recursive: true });
  appendFileSync(sessionsFile(stackId), `${pid} ${own.start}\n`);
}

function recordedSessions(stackId: string): Map<number, number> {
  const sessions = new Map<number, number>();
  let text = "";
  try {
    text = readFileSync(sessionsFile(stackId), "utf8");
  } catch {
    return sessions;
  }
  for (const line of text.split("\n")) {
    const [sid, start] = line.split(" ").map(Number);
    if (Number.isInteger(sid) && Number.isInteger(start)) sessions.set(sid!, start!);
  }
  // A session whose leader's pid now runs another, later process was recycled: not ours.
  for (const [sid, start] of sessions) {
    const leader = sessionOf(sid);
    if (leader !== undefined && leader.start !== start) sessions.delete(sid);
  }
  return sessions;
}

/**
 * Every live process of this stack: marked as its own in /proc/<pid>/environ (the environment a
 * process started with), or in a session one of its components was started in. The second catches
 * what the first misses: a process that renames itself with setproctitle overwrites its environment
 * (vLLM's `VLLM::EngineCore` and `VLLM::Worker` read as empty there), and its session id stays.
 * Our own process and zombies are left out.
 */
export function stackProcesses(stackId: string): { pid: number; command: string }[] {
  const mark = Buffer.from(`${STACK_MARK}=${stackId}\0`);
  const sessions = recordedSessions(stackId);
  const found: { pid: number; command: string }[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let environ: Buffer;
    try {
      environ = readFileSync(`/proc/${pid}/environ`);
    } catch {
      continue; // gone, or not ours to read
    }
    const at = environ.indexOf(mark);
    const marked = at === 0 || (at > 0 && environ[at - 1] === 0);
    const own = marked || inSession(sessions, pid);
    if (own && isAlive(pid)) found.push({ pid, command: commandLine(pid).trim().slice(0, 200) });
  }
  return found;
}

function inSession(sessions: Map<number, number>, pid: number): boolean {
  if (sessions.size === 0) return false;
  const s = sessionOf(pid);
  const leaderStart = s && sessions.get(s.session);
  return s !== undefined && leaderStart !== undefined && s.start >= leaderStart;
}

/** Forgets the recorded sessions (once down has left nothing of the stack alive). */
export function forgetSessions(stackId: string): void {
  rmSync(sessionsFile(stackId), { force: true });
}

/** Whether something already listens on host:port. */
export async function portInUse(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(true));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(false)));
  });
}

export async function checkHealth(health: Health): Promise<boolean> {
  try {
    if (health.kind === "http") {
      const response = await fetch(health.url, { signal: AbortSignal.timeout(2_000) });
      return response.ok;
    }
    if (health.kind === "tcp") {
      return await new Promise((resolve) => {
        const socket = createConnection({ host: health.host, port: health.port });
        socket.setTimeout(2_000);
        socket.once("connect", () => {
          socket.destroy();
          resolve(true);
        });
        socket.once("error", () => resolve(false));
        socket.once("timeout", () => {
          socket.destroy();
          resolve(false);
        });
      });
    }
    const { stdout } = await execFileAsync(health.command, health.args, { timeout: 10_000 });
    // A task queue is healthy once a worker polls it.
    if (health.args.includes("task-queue")) return /"identity"/.test(stdout);
    return true;
  } catch {
    return false;
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Whether any process is still running in the group `pgid` (a component's, led by the pid it
 * started as). Zombies do not count: dead, they wait only for their new parent to reap them.
 */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true; // no /proc to tell zombies apart
  }
  return entries.some((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      // "pid (comm) state ppid pgrp ...": the command may hold spaces and parentheses.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, , group] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return Number(group) === pgid && state !== "Z";
    } catch {
      return false; // gone meanwhile
    }
  });
}

/**
 * Ends every process left in a dead component's group (vLLM's engine core outlives a killed API
 * server) and waits until the group is empty, so a replacement never runs beside its remains.
 * Resolves false when something survived `timeoutMs`.
 */
export async function reapGroup(pgid: number, timeoutMs = 30_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (groupAlive(pgid)) {
    if (Date.now() > deadline) return false;
    signalGroup(pgid, "SIGKILL");
    await sleep(50);
  }
  return true;
}
