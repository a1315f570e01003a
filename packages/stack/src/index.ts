import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import { repoRoot, STACK_MARK } from "@bridle/service-kit";
import { type Component, stackComponents } from "./components.ts";
import { missingInstall, type StackConfig } from "./config.ts";
import {
  checkHealth,
  commandLine,
  forgetSessions,
  isAlive,
  portInUse,
  readPid,
  removeFile,
  signalGroup,
  sleep,
  stackProcesses,
  stopProcess,
  writePid,
} from "./processes.ts";
import { type ComponentState, ensureDirs, paths, readState, type StackState, tailFile } from "./state.ts";

export { imagesHome, stackComponents, vllmDtype } from "./components.ts";
export { loadStackConfig, type StackConfig } from "./config.ts";
export { stackProcesses } from "./processes.ts";
export { type Running, startComponent } from "./start-one.ts";
export { Supervisor } from "./supervisor.ts";

/** A failure the user can act on; the CLI prints its message without a stack trace. */
export class StackError extends Error {
  override name = "StackError";
}

export type Progress = (line: string) => void;

function supervisorPid(config: StackConfig): number | undefined {
  const pid = readPid(paths(config).supervisorPid);
  return pid !== undefined && isAlive(pid) && commandLine(pid).includes("supervise") ? pid : undefined;
}

/**
 * Brings the stack up in the background and waits until every component is healthy.
 * Safe to call twice; recovers stale pid files; names a taken port instead of failing obscurely.
 */
export async function up(config: StackConfig, progress: Progress = () => {}): Promise<StackState> {
  const missing = missingInstall(config);
  if (missing.length > 0) {
    throw new StackError(
      `not installed: ${missing.join(", ")}. Run ./bridle install (or ./bridle demo) first.`,
    );
  }
  ensureDirs(config);
  const components = stackComponents(config);
  const running = supervisorPid(config);
  if (running === undefined) {
    await recoverStale(config, components, progress);
    await checkPorts(config, components);
    spawnSupervisor(config);
    progress(`starting the stack (logs in ${config.dirs.logs})`);
    progress(
      `the gateway's API takes a bearer token, kept in ${config.apiTokenSource} (the CLI sends it itself)`,
    );
  } else {
    progress(`the stack is already running (supervisor pid ${running})`);
  }
  return waitUntilHealthy(config, components, progress);
}

async function recoverStale(config: StackConfig, components: Component[], progress: Progress): Promise<void> {
  const p = paths(config);
  if (readPid(p.supervisorPid) !== undefined) {
    progress("removing a stale supervisor pid file");
    removeFile(p.supervisorPid);
  }
  for (const component of components) {
    const pid = readPid(p.pid(component.name));
    if (pid === undefined) continue;
    if (isAlive(pid) && commandLine(pid).includes(component.command)) {
      progress(`stopping an orphaned ${component.name} (pid ${pid}) left by a supervisor that died`);
      await stopProcess(pid);
    }
    removeFile(p.pid(component.name));
  }
}

async function checkPorts(config: StackConfig, components: Component[]): Promise<void> {
  for (const component of components) {
    for (const { port, setting } of component.ports) {
      if (await portInUse(config.host, port)) {
        throw new StackError(
          `port ${port} on ${config.host} (for ${component.name}) is already in use by another program; free it or set ${setting}`,
        );
      }
    }
  }
}

function spawnSupervisor(config: StackConfig): void {
  const p = paths(config);
  const out = openSync(p.supervisorLog, "a");
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(repoRoot, "packages/stack/src/supervise.ts")],
    {
      cwd: repoRoot,
      // The supervisor loads its configuration from its environment: give it this stack's settings,
      // not whatever this process has (a test or a bench may run a second stack beside its own).
      env: {
        ...Object.fromEntries(
          Object.entries(process.env).filter(([k]) => !k.startsWith("BRIDLE_") && k !== "LOG_LEVEL"),
        ),
        ...config.settings,
        [STACK_MARK]: config.data,
      },
      stdio: ["ignore", out, out],
      detached: true,
    },
  );
  closeSync(out);
  if (child.pid) writePid(p.supervisorPid, child.pid);
  child.unref();
}

async function waitUntilHealthy(
  config: StackConfig,
  components: Component[],
  progress: Progress,
): Promise<StackState> {
  const seen = new Map<string, string>();
  const budget = components.reduce((sum, c) => sum + c.startTimeoutMs, 30_000);
  const deadline = Date.now() + budget;
  while (Date.now() < deadline) {
    const state = readState(config);
    if (state) {
      for (const c of state.components) {
        const key = `${c.status}:${c.restarts}`;
        if (seen.get(c.name) !== key && c.status !== "pending") progress(`  ${c.name.padEnd(9)} ${c.status}`);
        seen.set(c.name, key);
      }
      const failed = state.components.find((c) => c.status === "failed");
      if (failed) throw new StackError(`${failed.name} failed to start: ${failed.error ?? "see its log"}`);
      if (state.components.every((c) => c.status === "healthy")) return state;
    }
    const pid = readPid(paths(config).supervisorPid);
    if (pid === undefined || !isAlive(pid)) {
      throw new StackError(`the supervisor stopped; its log says:\n${tailFile(paths(config).supervisorLog)}`);
    }
    await sleep(500);
  }
  throw new StackError(
    `the stack did not become healthy within ${Math.round(budget / 1000)}s; see ${config.dirs.logs}`,
  );
}

/** Stops the stack: the supervisor stops its components in reverse order; leftovers are killed. */
/**
 * Stops the stack: the supervisor stops its components, each with its whole process group; then
 * any process still marked as this stack's (one that left its group, or outlived a killed
 * supervisor) is killed and waited for. Returns what had to be killed that way, so a leak shows.
 */
export async function down(
  config: StackConfig,
  progress: Progress = () => {},
): Promise<{ leftovers: { pid: number; command: string }[] }> {
  const p = paths(config);
  const pid = supervisorPid(config);
  if (pid !== undefined) {
    progress(`stopping the stack (supervisor pid ${pid})`);
    process.kill(pid, "SIGTERM");
    const deadline = Date.now() + 90_000;
    while (isAlive(pid) && Date.now() < deadline) await sleep(200);
    if (isAlive(pid)) process.kill(pid, "SIGKILL");
  } else {
    progress("the stack is not running");
  }
  for (const component of stackComponents(config)) {
    const leftover = readPid(p.pid(component.name));
    if (leftover !== undefined && isAlive(leftover) && commandLine(leftover).includes(component.command)) {
      progress(`stopping leftover ${component.name} (pid ${leftover})`);
      await stopProcess(leftover);
    }
    removeFile(p.pid(component.name));
  }
  removeFile(p.supervisorPid);
  const leftovers = stackProcesses(config.data);
  if (leftovers.length > 0) {
    progress(
      `killing ${leftovers.length} leftover process(es) of the stack: ${leftovers.map((l) => `${l.pid} ${l.command}`).join("; ")}`,
    );
    for (const l of leftovers) signalGroup(l.pid, "SIGKILL");
    const deadline = Date.now() + 10_000;
    while (leftovers.some((l) => isAlive(l.pid)) && Date.now() < deadline) await sleep(100);
  }
  // Nothing of the stack is left: the next down starts from the sessions the next up records.
  forgetSessions(config.data);
  return { leftovers };
}

export interface ComponentStatusView extends ComponentState {
  healthy: boolean;
}

/** The supervisor's view of each component, checked against a live health probe. */
export async function status(
  config: StackConfig,
): Promise<{ running: boolean; components: ComponentStatusView[] }> {
  const running = supervisorPid(config) !== undefined;
  const state = readState(config);
  const components = await Promise.all(
    stackComponents(config).map(async (component) => {
      const recorded = state?.components.find((c) => c.name === component.name);
      const healthy = running && (await checkHealth(component.health));
      return {
        ...(recorded ?? {
          name: component.name,
          status: "stopped" as const,
          restarts: 0,
          since: "",
          log: paths(config).log(component.name),
        }),
        ...(running ? {} : { status: "stopped" as const }),
        healthy,
      };
    }),
  );
  return { running, components };
}

/** Where a user finds each part of a running stack. */
export function endpoints(config: StackConfig): Record<string, string> {
  const http = (port: number) => `http://${config.host}:${port}`;
  return {
    gateway: http(config.ports.gateway),
    dashboard: `${http(config.ports.gateway)}/ui/ (bridle dashboard: with the token)`,
    guard: http(config.ports.guard),
    tasks: http(config.ports.tasks),
    verifier: http(config.ports.verifier),
    "temporal ui": `${http(config.ports.temporalUi)}/namespaces/bridle/workflows`,
    temporal: `${config.host}:${config.ports.temporal}`,
    "model server": config.vllmUrl,
  };
}
