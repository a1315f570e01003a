import { type ChildProcess, execFile, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { promisify } from "node:util";
import { type Logger, RestartPolicy } from "@bridle/service-kit";
import { type Component, lowerPriority } from "./components.ts";
import type { StackConfig } from "./config.ts";
import {
  checkHealth,
  portInUse,
  reapGroup,
  recordSession,
  removeFile,
  sleep,
  stopProcess,
  writePid,
} from "./processes.ts";
import { type ComponentState, ensureDirs, paths, type StackState, tailFile, writeState } from "./state.ts";

const execFileAsync = promisify(execFile);

/**
 * Runs the stack in the foreground: starts each component in order, waits for its health check,
 * restarts any that die (with backoff), and stops them all in reverse order on SIGTERM.
 * `bridle up` runs this detached; its state file is what `status` and `up` read.
 */
export class Supervisor {
  private readonly children = new Map<string, ChildProcess>();
  /** Per component: 1 s after a death, doubling up to 30 s while its restarts fail. */
  private readonly restartPolicies = new Map<string, RestartPolicy>();
  private readonly state: StackState;
  private stopping = false;

  constructor(
    private readonly config: StackConfig,
    private readonly components: Component[],
    private readonly log: Logger,
  ) {
    const p = paths(config);
    this.state = {
      supervisorPid: process.pid,
      startedAt: new Date().toISOString(),
      stopping: false,
      components: components.map((c) => ({
        name: c.name,
        status: "pending",
        restarts: 0,
        since: new Date().toISOString(),
        log: p.log(c.name),
      })),
    };
  }

  async run(): Promise<void> {
    ensureDirs(this.config);
    writePid(paths(this.config).supervisorPid, process.pid);
    this.save();
    process.on("SIGTERM", () => void this.stop(0));
    process.on("SIGINT", () => void this.stop(0));
    for (const component of this.components) {
      const ok = await this.start(component);
      if (!ok) {
        this.log.error({ component: component.name }, "component failed to start; stopping the stack");
        await this.stop(1);
        return;
      }
    }
    this.log.info("stack healthy");
  }

  private entry(name: string): ComponentState {
    return this.state.components.find((c) => c.name === name)!;
  }

  private update(name: string, patch: Partial<ComponentState>): void {
    const entry = this.entry(name);
    Object.assign(entry, patch, patch.status ? { since: new Date().toISOString() } : {});
    if (patch.status && patch.status !== "failed") delete entry.error;
    if (patch.error) entry.error = patch.error;
    this.save();
  }

  private save(): void {
    writeState(this.config, { ...this.state, stopping: this.stopping });
  }

  /** Starts a component and waits until it is healthy; false if it failed. */
  private async start(component: Component): Promise<boolean> {
    for (const { port, setting } of component.ports) {
      if (await portInUse(this.config.host, port)) {
        this.update(component.name, {
          status: "failed",
          error: `port ${port} on ${this.config.host} is already in use by another program; free it or set ${setting}`,
        });
        return false;
      }
    }
    this.update(component.name, { status: "starting" });
    const child = this.spawn(component);
    const healthy = await this.waitHealthy(component, child);
    if (!healthy) return false;
    for (const step of component.afterStart ?? []) {
      await execFileAsync(step.command, step.args, { timeout: 30_000 }).catch((err: unknown) =>
        this.log.warn({ err, component: component.name }, "after-start step failed"),
      );
    }
    this.update(component.name, { status: "healthy" });
    this.log.info({ component: component.name, pid: child.pid }, "healthy");
    return true;
  }

  private spawn(component: Component): ChildProcess {
    const p = paths(this.config);
    const out = openSync(p.log(component.name), "a");
    const child = spawn(component.command, component.args, {
      env: { ...process.env, ...component.env },
      stdio: ["ignore", out, out],
      detached: true,
    });
    closeSync(out);
    if (child.pid && component.nice !== undefined) lowerPriority(child.pid, component.nice, this.log);
    this.children.set(component.name, child);
    if (child.pid) {
      writePid(p.pid(component.name), child.pid);
      // Its own session (detached): what it starts is found by it even after renaming itself.
      recordSession(this.config.data, child.pid);
    }
    this.update(component.name, child.pid ? { pid: child.pid } : {});
    child.once("exit", (code, signal) => void this.onExit(component, child, code, signal));
    child.once("error", (err) => this.log.error({ err, component: component.name }, "spawn failed"));
    return child;
  }

  private async waitHealthy(component: Component, child: ChildProcess): Promise<boolean> {
    const deadline = Date.now() + component.startTimeoutMs;
    while (Date.now() < deadline && !this.stopping) {
      if (child.exitCode !== null || child.signalCode !== null) {
        this.update(component.name, {
          status: "failed",
          error: `exited during start (code ${child.exitCode ?? child.signalCode}); last log lines:\n${tailFile(paths(this.config).log(component.name))}`,
        });
        return false;
      }
      if (await checkHealth(component.health)) return true;
      await sleep(500);
    }
    if (!this.stopping) {
      this.update(component.name, {
        status: "failed",
        error: `not healthy after ${component.startTimeoutMs / 1000}s; last log lines:\n${tailFile(paths(this.config).log(component.name))}`,
      });
    }
    return false;
  }

  /** A component that dies after it was healthy is restarted with backoff until the stack stops. */
  private async onExit(
    component: Component,
    child: ChildProcess,
    code: number | null,
    signal: NodeJS.Signals | null,
  ): Promise<void> {
    if (this.stopping || this.children.get(component.name) !== child) return;
    if (this.entry(component.name).status !== "healthy") return; // start failures belong to waitHealthy
    this.log.warn({ component: component.name, code, signal }, "component exited; restarting");
    removeFile(paths(this.config).pid(component.name));
    // Its children die with it before anything replaces it (one model server, never two).
    if (child.pid && !(await reapGroup(child.pid))) {
      this.log.error(
        { component: component.name, pgid: child.pid },
        "processes of the dead component survive SIGKILL",
      );
    }
    let policy = this.restartPolicies.get(component.name);
    if (!policy) {
      policy = new RestartPolicy({ initialMs: 1_000, maxMs: 30_000 });
      this.restartPolicies.set(component.name, policy);
    }
    let delay = policy.died(false) ?? 0;
    while (!this.stopping) {
      const restarts = this.entry(component.name).restarts + 1;
      this.update(component.name, { status: "restarting", restarts });
      await sleep(delay);
      if (this.stopping) return;
      const next = this.spawn(component);
      if (await this.waitHealthy(component, next)) {
        policy.up();
        this.update(component.name, { status: "healthy" });
        this.log.info({ component: component.name, pid: next.pid, restarts }, "restarted");
        return;
      }
      if (next.pid) await stopProcess(next.pid, 2_000); // its whole group, waited for
      delay = policy.died(true) ?? 0;
    }
  }

  async stop(code: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.save();
    this.log.info("stopping the stack");
    for (const component of [...this.components].reverse()) {
      const child = this.children.get(component.name);
      if (child?.pid) await stopProcess(child.pid);
      removeFile(paths(this.config).pid(component.name));
      const entry = this.entry(component.name);
      if (entry.status !== "failed") this.update(component.name, { status: "stopped" });
    }
    removeFile(paths(this.config).supervisorPid);
    this.save();
    process.exit(code);
  }
}
