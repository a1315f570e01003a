import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { groupAlive, isAlive, reapGroup } from "./processes.ts";

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
