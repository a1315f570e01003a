/** What the long commands (soak, benchmarks) share: a stack of their own and how to read its runs. */
import { RunProgress } from "@bridle/contracts";
import { loadStackConfig } from "@bridle/stack";
import { z } from "zod";
import { separateStackEnv } from "../src/stack-env.ts";

/** The stack named `name` in the `<k>000` ports (see separateStackEnv), its settings in this process. */
export function ownStack(name: string, k: number) {
  Object.assign(process.env, separateStackEnv(name, k));
  const config = loadStackConfig(process.env);
  return {
    config,
    gateway: `http://${config.host}:${config.ports.gateway}`,
    headers: { authorization: `Bearer ${config.apiToken}` },
  };
}

export const say = (line: string) => process.stdout.write(`${line}\n`);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const RunView = z.object({
  status: z.string(),
  progress: RunProgress.nullable(),
  failure: z.string().nullable(),
});
