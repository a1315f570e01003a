import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { eventually } from "../test-support.ts";
import { groupAlive } from "./processes.ts";

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
      const group = await eventually(() => {
        const found = spawnSync("pgrep", ["-P", String(owner.pid), "-x", "bash"], { encoding: "utf8" });
        const pid = Number.parseInt(found.stdout, 10);
        return pid > 0 && groupAlive(pid) ? pid : undefined;
      }, "the component to start");
      owner.kill("SIGKILL");
      await eventually(() => (groupAlive(group) ? undefined : true), "the component's group to be killed");
      expect(groupAlive(group)).toBe(false);
    } finally {
      owner.kill("SIGKILL");
      rmSync(logs, { recursive: true, force: true });
    }
  });
});
