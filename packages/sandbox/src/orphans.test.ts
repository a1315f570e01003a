import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cgroupControllers, processAlive, Sandbox } from "./index.ts";
import { hostProcessesWith } from "./test-support.ts";

const here = dirname(fileURLToPath(import.meta.url));
let base: string;

/** Live host pids whose command line contains `marker`. */
const withMarker = (marker: string) => hostProcessesWith(marker).filter(processAlive);
/** Live host pids that run `sleep <marker>` itself (not bwrap or bash, whose arguments name it). */
const sleeping = (marker: string) =>
  withMarker(marker).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8") === `sleep\0${marker}\0`;
    } catch {
      return false;
    }
  });

async function until<T>(what: string, probe: () => T | undefined, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), "bridle-orphans-"));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe("an owner killed in the middle of a run", () => {
  it("takes its sandbox's processes with it, and reapOrphans clears its group and folder", async () => {
    // The owner: a separate Node process (as the runner is) running a sandboxed command that never ends.
    const script = `
      import { Sandbox } from ${JSON.stringify(join(here, "index.ts"))};
      const sandbox = await Sandbox.create({ baseDir: ${JSON.stringify(base)} });
      console.log("ready");
      await sandbox.run(["bash", "-c", "(setsid sleep 600.5151 &); sleep 600.5151"], { timeoutMs: 600_000 });
    `;
    const owner = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: here,
      stdio: ["ignore", "pipe", "inherit"],
    });
    // Both sleeps running: the sandbox is set up (bwrap's and bash's own arguments name the marker
    // too, and killing the owner while bwrap is still setting up is another case: reapOrphans').
    await until("the sandboxed command to start", () =>
      sleeping("600.5151").length >= 2 ? true : undefined,
    );
    const folders = readdirSync(base);
    expect(folders).toHaveLength(1);
    expect(folders[0]).toMatch(new RegExp(`^bridle-sbx-${owner.pid}-`));

    owner.kill("SIGKILL");
    // bwrap dies with its parent, and the sandbox's pid namespace with it: even the setsid'd sleep.
    await until("the sandbox's processes to die", () =>
      withMarker("600.5151").length === 0 ? true : undefined,
    );

    const orphans = await Sandbox.reapOrphans(base);
    expect(orphans.folders).toEqual(folders);
    expect(readdirSync(base)).toEqual([]);
    const controllers = await cgroupControllers();
    if (controllers.length > 0) {
      // Cgroups are machine-wide: the sweep also reaps those of other dead owners (a stack stopped
      // mid-rollout on this machine), so only this owner's are counted.
      const own = orphans.groups.filter((g) => g.startsWith(`${owner.pid}-`));
      expect(own).toHaveLength(1);
      for (const c of controllers)
        for (const group of orphans.groups)
          expect(existsSync(join("/sys/fs/cgroup", c, "bridle", group))).toBe(false);
    }
    // A second sweep finds nothing, and a live owner's sandboxes are never touched.
    const mine = await Sandbox.create({ baseDir: base });
    expect(await Sandbox.reapOrphans(base)).toEqual({ groups: [], folders: [] });
    expect(existsSync(mine.root)).toBe(true);
    await mine.dispose();
  }, 60_000);
});
