import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type RunningProcess, spawnProcess } from "./process.ts";

const entry = fileURLToPath(new URL("./scripted-upstream.ts", import.meta.url));

/**
 * Starts the scripted upstream (a TEST DOUBLE for the model server) as its own process, on `port`
 * or an ephemeral one, and resolves with its URL once it listens.
 */
export async function spawnScriptedUpstream(
  script: unknown,
  options: { port?: number; record?: boolean } = {},
): Promise<RunningProcess & { url: string }> {
  const dir = mkdtempSync(join(tmpdir(), "bridle-upstream-"));
  const file = join(dir, "script.json");
  writeFileSync(file, JSON.stringify(script));
  const args = ["--import", "tsx", entry, "--port", String(options.port ?? 0), "--script", file];
  if (options.record === false) args.push("--no-record");
  const proc = await spawnProcess(process.execPath, args, {
    ready: (output) => /listening on (\S+)/.test(output),
  });
  const url = /listening on (\S+)/.exec(proc.output())![1]!;
  return { ...proc, url };
}
