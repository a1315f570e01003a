import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { StackConfig } from "./config.ts";

export const ComponentStatus = z.enum(["pending", "starting", "healthy", "restarting", "failed", "stopped"]);
export type ComponentStatus = z.infer<typeof ComponentStatus>;

export const ComponentState = z.object({
  name: z.string(),
  status: ComponentStatus,
  pid: z.number().int().optional(),
  restarts: z.number().int(),
  since: z.string(),
  log: z.string(),
  error: z.string().optional(),
});
export type ComponentState = z.infer<typeof ComponentState>;

export const StackState = z.object({
  supervisorPid: z.number().int(),
  startedAt: z.string(),
  stopping: z.boolean(),
  components: z.array(ComponentState),
});
export type StackState = z.infer<typeof StackState>;

export const paths = (config: StackConfig) => ({
  state: join(config.dirs.run, "state.json"),
  supervisorPid: join(config.dirs.run, "supervisor.pid"),
  supervisorLog: join(config.dirs.logs, "supervisor.log"),
  pid: (name: string) => join(config.dirs.run, `${name}.pid`),
  log: (name: string) => join(config.dirs.logs, `${name}.log`),
});

export function ensureDirs(config: StackConfig): void {
  for (const dir of Object.values(config.dirs)) mkdirSync(dir, { recursive: true });
}

/** Written atomically, so a reader never sees half a file. */
export function writeState(config: StackConfig, state: StackState): void {
  const file = paths(config).state;
  writeFileSync(`${file}.tmp`, JSON.stringify(state, null, 2));
  renameSync(`${file}.tmp`, file);
}

export function readState(config: StackConfig): StackState | undefined {
  try {
    return StackState.parse(JSON.parse(readFileSync(paths(config).state, "utf8")));
  } catch {
    return undefined;
  }
}

/** The last lines of a log file, for error messages. */
export function tailFile(file: string, lines = 15): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}
