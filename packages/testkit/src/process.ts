import { type ChildProcess, spawn } from "node:child_process";

/** A child process started for a test or a benchmark, with its output kept for failure messages. */
export interface RunningProcess {
  child: ChildProcess;
  output: () => string;
  stop: () => Promise<void>;
}

/**
 * Spawns a process and waits until `ready` (given the output so far) says it is up (polled every 50 ms), or fails with its
 * output when it exits or `timeoutMs` passes. `stop` sends SIGTERM, then SIGKILL after 3 s.
 */
export async function spawnProcess(
  command: string,
  args: string[],
  options: {
    env?: Record<string, string>;
    cwd?: string;
    ready: (output: string) => Promise<boolean> | boolean;
    timeoutMs?: number;
  },
): Promise<RunningProcess> {
  const child = spawn(command, args, {
    env: { ...process.env, ...options.env },
    cwd: options.cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (b: Buffer) => {
    output = (output + b.toString("utf8")).slice(-20_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const kill = setTimeout(() => child.kill("SIGKILL"), 3_000);
      child.once("exit", () => {
        clearTimeout(kill);
        resolve();
      });
      child.kill("SIGTERM");
    });
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${command} exited with ${child.exitCode}:\n${output}`);
    if (await Promise.resolve(options.ready(output)).catch(() => false))
      return { child, output: () => output, stop };
    await new Promise((r) => setTimeout(r, 50));
  }
  await stop();
  throw new Error(`${command} ${args.join(" ")} was not ready in time:\n${output}`);
}

/** True when `url` answers 200. */
export async function httpOk(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
  await res.body?.cancel();
  return res.ok;
}
