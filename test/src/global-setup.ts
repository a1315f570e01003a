import { spawnSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { down, loadStackConfig, up } from "@bridle/stack";
import type { TestProject } from "vitest/node";
import { testStackEnv } from "./stack-env.ts";

declare module "vitest" {
  export interface ProvidedContext {
    upLines: string[];
  }
}

/**
 * Brings up the real embedded stack (Temporal, vLLM, the services, the worker) for the whole
 * run, starting from a stale pid file as if a previous supervisor had been killed, and stops it
 * at the end.
 */
export default async function setup(project: TestProject) {
  const env = { ...process.env, ...testStackEnv };
  Object.assign(process.env, testStackEnv);
  const config = loadStackConfig(env);
  await down(config); // a stack left over from an interrupted run
  rmSync(config.data, { recursive: true, force: true });
  mkdirSync(config.dirs.run, { recursive: true });
  const dead = spawnSync("true").pid; // a pid that no longer runs
  writeFileSync(join(config.dirs.run, "supervisor.pid"), `${dead}\n`);

  const lines: string[] = [];
  const started = Date.now();
  await up(config, (line) => {
    lines.push(line);
    process.stdout.write(`[stack] ${line}\n`);
  });
  process.stdout.write(`[stack] healthy after ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  project.provide("upLines", lines);

  return async () => {
    const { leftovers } = await down(config, (line) => process.stdout.write(`[stack] ${line}\n`));
    if (!process.env.BRIDLE_TEST_KEEP_DATA) rmSync(config.data, { recursive: true, force: true });
    // Nothing the suite started may outlive it: down stops every component with its process group,
    // so a process still marked as the stack's at this point is a leak (killed now, and failed on).
    if (leftovers.length > 0) {
      throw new Error(
        `the suite left ${leftovers.length} process(es) of its stack running after down:\n${leftovers.map((l) => `  ${l.pid} ${l.command}`).join("\n")}`,
      );
    }
  };
}
