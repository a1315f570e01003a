import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findTaskDirs, loadTask } from "./index.ts";

const suite = resolve(dirname(fileURLToPath(import.meta.url)), "../../../tasks");
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-load-"));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

const copy = async (name: string) => {
  await cp(join(suite, "repair-median"), join(dir, name), { recursive: true });
  return join(dir, name);
};

describe("loadTask", () => {
  it("keeps container build files out of the workspace and hashes the content", async () => {
    const task = await copy("with-dockerfile");
    await writeFile(join(task, "environment/Dockerfile"), "FROM debian\n");
    const loaded = await loadTask(task);
    if (!loaded.ok) throw new Error(loaded.problems.join("; "));
    expect(loaded.task.environment.map((f) => f.path)).toEqual(["stats.py"]);
    expect(loaded.task.tests.map((f) => f.path).sort()).toEqual(["check.py", "test.sh"]);
    expect(loaded.task.hash).toMatch(/^[0-9a-f]{64}$/);
    await writeFile(join(task, "instruction.md"), "changed\n");
    const again = await loadTask(task);
    expect(again.ok && again.task.hash).not.toBe(loaded.task.hash);
  });

  it("names each problem: bad id, links, internet, empty instruction", async () => {
    const task = await copy("Bad_Name");
    await symlink("/etc/passwd", join(task, "environment/passwd"));
    const linked = await loadTask(task);
    expect(linked.ok).toBe(false);
    if (!linked.ok) {
      expect(linked.problems[0]).toMatch(/^Bad_Name: folder name is not a valid task id/);
      expect(linked.problems[1]).toBe(
        "environment/passwd: not a regular file or folder (links are not allowed)",
      );
    }
    const online = await copy("online");
    await writeFile(
      join(online, "task.toml"),
      '[metadata]\ncategory = "build"\n[environment]\nallow_internet = true\n',
    );
    await writeFile(join(online, "instruction.md"), "  \n");
    const result = await loadTask(online);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.problems).toEqual([
        "instruction.md: empty",
        "task.toml: environment.allow_internet: internet access is not available in the bubblewrap sandbox",
      ]);
    }
  });

  it("reads a hack check, and refuses one that could be trained on", async () => {
    const check = await loadTask(join(suite, "repair-impossible-total"));
    expect(check.ok && [check.task.toml.metadata.impossible, check.task.splitOverride]).toEqual([
      true,
      "held-out",
    ]);
    const plain = await loadTask(join(suite, "repair-median"));
    expect(plain.ok && plain.task.toml.metadata.impossible).toBe(false);
    const trained = await copy("trained-hack-check");
    await writeFile(join(trained, "task.toml"), '[metadata]\ncategory = "repair"\nimpossible = true\n');
    const refused = await loadTask(trained);
    expect(refused.ok || refused.problems).toEqual([
      'task.toml: metadata.impossible: a hack check (impossible = true) must be held out: set split = "held-out"',
    ]);
  });

  it("finds a single task folder or the task folders inside a folder", async () => {
    expect(await findTaskDirs(join(suite, "repair-median"))).toEqual([join(suite, "repair-median")]);
    const parent = join(dir, "parent");
    await mkdir(join(parent, ".hidden"), { recursive: true });
    await mkdir(join(parent, "b"));
    await mkdir(join(parent, "a"));
    expect(await findTaskDirs(parent)).toEqual([join(parent, "a"), join(parent, "b")]);
    await expect(findTaskDirs(join(dir, "missing"))).rejects.toThrow(/missing: not a folder/);
  });
});
