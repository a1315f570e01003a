import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import type { Writable } from "node:stream";
import { type Component, lowerPriority } from "./components.ts";
import { signalGroup } from "./processes.ts";

/**
 * One stack component started on its own from the launcher's definition, as `bridle up` would start
 * it but without the supervisor: for tests and benchmarks that need a few real pieces.
 */
export interface Running {
  name: string;
  pid: number;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Nothing outlives its owner: a small watcher kills the component's whole group once this process
 * is gone, however it ended (a test worker torn down mid-start, SIGKILL), and leaves by itself
 * once the group is gone.
 */
function watchOwner(group: number): void {
  const script = `while kill -0 ${process.pid} 2>/dev/null; do kill -0 -${group} 2>/dev/null || exit 0; sleep 1; done; kill -KILL -${group} 2>/dev/null`;
  spawn("sh", ["-c", script], { detached: true, stdio: "ignore" }).unref();
}

/**
 * The component waits at this gate (a shell reading fd 3) until its watcher runs, then becomes the
 * command itself. An owner that dies between the two spawns closes the pipe, and the gate exits
 * instead of starting a component nobody would end.
 */
const GATE = 'read -r go <&3 && [ "$go" = go ] && exec 3<&- && exec "$@"; exit 70';

/**
 * Starts a component (command, args, env from `components.ts`) and waits until it is ready: its
 * health URL answers, or (a component without one, such as a worker) `ready` says so.
 */
export async function startComponent(
  component: Component,
  logDir: string,
  timeoutMs = 300_000,
  ready?: () => Promise<boolean>,
): Promise<Running> {
  const { health } = component;
  const isReady =
    ready ??
    (health.kind === "http"
      ? () =>
          fetch(health.url).then(
            (r) => r.ok,
            () => false,
          )
      : undefined);
  if (!isReady) throw new Error(`${component.name}: no HTTP health check; say how to tell it is ready`);
  const log = join(logDir, `${component.name}.log`);
  const fd = openSync(log, "a");
  const child: ChildProcess = spawn("sh", ["-c", GATE, "sh", component.command, ...component.args], {
    env: { ...process.env, ...component.env },
    stdio: ["ignore", fd, fd, "pipe"],
    detached: true,
  });
  closeSync(fd);
  if (child.pid !== undefined) watchOwner(child.pid);
  const gate = child.stdio[3] as Writable;
  gate.on("error", () => {}); // a component that died at the gate: its exit code says so below
  gate.end("go\n");
  if (child.pid !== undefined && component.nice !== undefined) lowerPriority(child.pid, component.nice);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`${component.name} exited with ${child.exitCode}; see ${log}`);
    if (await isReady()) break;
    if (Date.now() > deadline) {
      if (child.pid !== undefined) signalGroup(child.pid, "SIGKILL");
      throw new Error(`${component.name} not healthy in time; see ${log}`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  return {
    name: component.name,
    pid: child.pid ?? 0,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      // Gone already: it exited, or a signal ended it (a test's SIGKILL).
      if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
      const exited = new Promise((r) => child.once("exit", r));
      process.kill(-child.pid, signal); // the whole group: vLLM's engine core is a child process
      const timer = setTimeout(() => child.pid && process.kill(-child.pid, "SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
