import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { groupAlive } from "./processes.ts";
import { startComponent } from "./start-one.ts";
import { eventually } from "./test-support.ts";

describe("a component started on its own", () => {
  it("dies with the process that started it, even one SIGKILLed while the component still starts", async () => {
    const logs = mkdtempSync(join(tmpdir(), "bridle-start-one-"));
    // The owner: a separate node process that starts a component which never turns healthy (a
    // child of its own included, as vLLM's engine is) and waits for it.
    const script = `
      import { startComponent } from ${JSON.stringify(join(import.meta.dirname, "start-one.ts"))};
      startComponent({ name: "slow", command: "bash", args: ["-c", "sleep 300 & sleep 300; wait"], env: {},
        health: { kind: "http", url: "http://127.0.0.1:9/" } }, ${JSON.stringify(logs)}).catch(() => {});
    `;
    const owner = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      // Killed the moment its first child exists: before or after it started the component's
      // watcher, nothing of the component may be left.
      const group = await eventually(
        () => {
          const found = spawnSync("pgrep", ["-o", "-P", String(owner.pid)], { encoding: "utf8" });
          const pid = Number.parseInt(found.stdout, 10);
          return pid > 0 ? pid : undefined;
        },
        "the component to start",
        15_000,
        5,
      );
      owner.kill("SIGKILL");
      await eventually(() => (groupAlive(group) ? undefined : true), "the component's group to be killed");
      expect(groupAlive(group)).toBe(false);
    } finally {
      owner.kill("SIGKILL");
      rmSync(logs, { recursive: true, force: true });
    }
  });

  it("runs at its nice value, and so does what it starts", async () => {
    const logs = mkdtempSync(join(tmpdir(), "bridle-start-one-"));
    // A component that starts a child of its own, then answers its health check.
    const server = `require("node:child_process").spawn("sleep", ["300"], { stdio: "ignore" });
      require("node:http").createServer((q, r) => r.end("ok")).listen(19391, "127.0.0.1");`;
    const running = await startComponent(
      {
        name: "niced",
        command: process.execPath,
        args: ["-e", server],
        env: {},
        ports: [],
        health: { kind: "http", url: "http://127.0.0.1:19391/" },
        startTimeoutMs: 10_000,
        nice: 7,
      },
      logs,
      10_000,
    );
    try {
      // Field 19 of /proc/<pid>/stat, counted after the command name's closing parenthesis.
      const nice = (pid: number) => {
        const stat = spawnSync("cat", [`/proc/${pid}/stat`], { encoding: "utf8" }).stdout;
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
      };
      expect(nice(running.pid)).toBe(7);
      const child = Number.parseInt(
        spawnSync("pgrep", ["-P", String(running.pid), "-x", "sleep"], { encoding: "utf8" }).stdout,
        10,
      );
      expect(nice(child)).toBe(7);
    } finally {
      await running.stop();
      rmSync(logs, { recursive: true, force: true });
    }
  });
});
