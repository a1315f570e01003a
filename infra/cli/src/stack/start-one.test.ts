import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { groupAlive } from "./processes.ts";

const until = async (ok: () => boolean, what: string, ms = 15_000) => {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

describe("a component started on its own", () => {
  it("dies with the process that started it, even one SIGKILLed while the component still starts", async () => {
    const logs = mkdtempSync(join(tmpdir(), "bridle-start-one-"));
    // The owner: a separate node process that starts a component which never turns healthy (a
    // child of its own included, as vLLM's engine is), prints the component's group, then waits.
    const script = `
      import { startComponent } from ${JSON.stringify(join(import.meta.dirname, "start-one.ts"))};
      startComponent({ name: "slow", command: "bash", args: ["-c", "sleep 300 & sleep 300; wait"], env: {},
        health: { kind: "http", url: "http://127.0.0.1:9/" } }, ${JSON.stringify(logs)}).catch(() => {});
    `;
    const owner = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      let group = 0;
      await until(() => {
        const found = spawnSync("pgrep", ["-P", String(owner.pid), "-x", "bash"], { encoding: "utf8" });
        group = Number.parseInt(found.stdout, 10) || 0;
        return group > 0 && groupAlive(group);
      }, "the component to start");
      owner.kill("SIGKILL");
      await until(() => !groupAlive(group), "the component's group to be killed");
      expect(groupAlive(group)).toBe(false);
    } finally {
      owner.kill("SIGKILL");
      rmSync(logs, { recursive: true, force: true });
    }
  });
});
