import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { STACK_MARK } from "@bridle/service-kit";
import { describe, expect, it } from "vitest";
import { loadStackConfig } from "./config.ts";
import { down } from "./index.ts";
import {
  commandLine,
  groupAlive,
  isAlive,
  reapGroup,
  recordSession,
  sessionOf,
  sessionsFile,
  stackProcesses,
} from "./processes.ts";
import { eventually } from "./test-support.ts";

const sleeping = (pid: number | undefined) => (p: { pid: number; command: string }) =>
  p.pid === pid && p.command === "sleep 300";

/** A process of this session that runs `sleep 300`, found without the stack's mark or records. */
function sleepInSession(session: number): number | undefined {
  return readdirSync("/proc")
    .map(Number)
    .find((pid) => sessionOf(pid)?.session === session && commandLine(pid).trim() === "sleep 300");
}

describe("a dead component's process group", () => {
  it("is reaped whole: children that outlive their leader (as vLLM's engine core does) are ended and waited for", async () => {
    // A leader with two children in its group, like vLLM's API server and its engine processes.
    const leader = spawn("bash", ["-c", "sleep 300 & sleep 300 & echo started; wait"], {
      detached: true,
      stdio: ["ignore", "pipe", "ignore"],
    });
    await new Promise((resolve) => leader.stdout!.once("data", resolve));
    const pgid = leader.pid!;
    process.kill(pgid, "SIGKILL"); // the leader alone dies, as a crash or an OOM kill does
    await new Promise((resolve) => leader.once("exit", resolve));
    expect(isAlive(pgid)).toBe(false);
    expect(groupAlive(pgid)).toBe(true); // its children live on: what a plain restart would leave
    expect(await reapGroup(pgid)).toBe(true);
    expect(groupAlive(pgid)).toBe(false);
  });
});

describe("a group whose processes are all zombies", () => {
  it("is not alive: its members are dead and wait only to be reaped by their new parent", async () => {
    // A parent that forks a child into a group of its own and never waits for it: the child stays a
    // zombie, as a component's do when the machine's init reaps them late.
    const parent = spawn(
      "python3",
      [
        "-c",
        "import os, time\npid = os.fork()\nif pid == 0:\n    os.setpgid(0, 0)\n    os._exit(0)\nprint(pid, flush=True)\ntime.sleep(60)",
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      const child = await new Promise<number>((resolve) =>
        parent.stdout.once("data", (chunk: Buffer) => resolve(Number.parseInt(chunk.toString(), 10))),
      );
      await eventually(
        () =>
          /\) Z \d+ (\d+)/.exec(readFileSync(`/proc/${child}/stat`, "utf8"))?.[1] === String(child)
            ? true
            : undefined,
        "the child to be a zombie leading its own group",
      );
      expect(() => process.kill(-child, 0)).not.toThrow(); // the kernel still lists the group
      expect(groupAlive(child)).toBe(false);
    } finally {
      parent.kill("SIGKILL");
    }
  });
});

describe("processes that leave their group", () => {
  it("are found by the stack's mark and killed by down, which says so", async () => {
    const home = mkdtempSync(join(tmpdir(), "bridle-leak-"));
    const config = loadStackConfig({ BRIDLE_HOME: home });
    const mark = { ...process.env, [STACK_MARK]: config.data };
    try {
      // setsid: a new session and group, out of reach of any group kill (a daemonising child does this).
      const escaped = spawn("setsid", ["sleep", "300"], { env: mark, stdio: "ignore" });
      const unmarked = spawn("sleep", ["300"], { stdio: "ignore" });
      await eventually(
        () => stackProcesses(config.data).find(sleeping(escaped.pid)),
        "the escaped sleep to run",
      );
      await eventually(
        () => (commandLine(unmarked.pid!).startsWith("sleep") ? true : undefined),
        "the plain sleep",
      );
      const found = stackProcesses(config.data).map((p) => p.pid);
      expect(found).toContain(escaped.pid);
      expect(found).not.toContain(unmarked.pid);
      expect(stackProcesses(`${config.data}-other`)).toEqual([]);

      const lines: string[] = [];
      const { leftovers } = await down(config, (line) => lines.push(line));
      expect(leftovers.map((l) => l.pid)).toEqual([escaped.pid]);
      expect(leftovers[0]!.command).toBe("sleep 300");
      expect(lines.join("\n")).toMatch(/killing 1 leftover process\(es\) of the stack: \d+ sleep 300/);
      expect(isAlive(escaped.pid!)).toBe(false);
      expect(stackProcesses(config.data)).toEqual([]);
      unmarked.kill("SIGKILL");
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("processes that rename themselves", () => {
  it("are found by the session their component was started in, though their environment reads empty", async () => {
    const home = mkdtempSync(join(tmpdir(), "bridle-renamed-"));
    const config = loadStackConfig({ BRIDLE_HOME: home });
    try {
      // A component (its own session, as the supervisor starts it) whose child's environment is
      // empty, as /proc shows vLLM's engine processes after setproctitle overwrote theirs.
      const leader = spawn("bash", ["-c", "env -i sleep 300 & echo started; wait"], {
        detached: true,
        env: { ...process.env, [STACK_MARK]: config.data },
        stdio: ["ignore", "pipe", "ignore"],
      });
      await new Promise((resolve) => leader.stdout!.once("data", resolve));
      const child = () => stackProcesses(config.data).filter((p) => p.command === "sleep 300");
      // By the mark alone the child is invisible: the leak the suite's check would miss (checked
      // once it runs sleep, so that the empty answer is not just a child still starting).
      await eventually(() => sleepInSession(leader.pid!), "the child to run sleep");
      expect(child()).toEqual([]);
      recordSession(config.data, leader.pid!);
      expect(readFileSync(sessionsFile(config.data), "utf8")).toMatch(new RegExp(`^${leader.pid} \\d+\n$`));
      const found = await eventually(() => child()[0], "the renamed child to run sleep");

      // A recorded session whose leader pid now runs a later process is not the stack's.
      writeFileSync(sessionsFile(config.data), `${leader.pid} 0\n`);
      expect(child()).toEqual([]);
      recordSession(config.data, leader.pid!);

      // The leader dies alone (a crash); down still finds its renamed child, kills it, and forgets.
      process.kill(leader.pid!, "SIGKILL");
      const { leftovers } = await down(config);
      expect(leftovers.map((l) => l.pid)).toContain(found!.pid);
      expect(isAlive(found!.pid)).toBe(false);
      expect(existsSync(sessionsFile(config.data))).toBe(false);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
