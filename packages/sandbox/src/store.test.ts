import { chmod, mkdir, mkdtemp, readFile, rm, stat, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shareFiles, sweepStore } from "./store.ts";

let root: string;
const store = () => join(root, "files");

/** An unpacked image's files: the same base, and one file of its own. */
async function image(name: string, own: string): Promise<string> {
  const rootfs = join(root, name, "rootfs");
  await mkdir(join(rootfs, "usr", "bin"), { recursive: true });
  await mkdir(join(rootfs, "etc"), { recursive: true });
  await writeFile(join(rootfs, "usr", "bin", "tool"), "#!/bin/sh\necho tool\n".repeat(500));
  await chmod(join(rootfs, "usr", "bin", "tool"), 0o755);
  await writeFile(join(rootfs, "etc", "os-release"), "ID=debian\n");
  await writeFile(join(rootfs, "etc", "empty"), "");
  await writeFile(join(rootfs, "etc", "own"), own);
  await symlink("os-release", join(rootfs, "etc", "link"));
  const when = new Date("2026-01-01T00:00:00Z");
  for (const f of ["usr/bin/tool", "etc/os-release", "etc/own"]) await utimes(join(rootfs, f), when, when);
  return rootfs;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "bridle-store-"));
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe("the store of files unpacked images share", () => {
  it("keeps one copy of what two images have in common, and each image still reads its own files", async () => {
    const a = await image("a", "a's own\n");
    const first = await shareFiles(a, store());
    expect(first.files).toBe(4);
    expect(first.bytesShared).toBe(0);
    expect(first.added).toHaveLength(3); // the empty file is left alone

    const b = await image("b", "b's own\n");
    const second = await shareFiles(b, store());
    expect(second.bytesShared).toBe((await stat(join(a, "usr", "bin", "tool"))).size + "ID=debian\n".length);
    expect(second.added).toHaveLength(1); // b's own file
    const [ta, tb] = await Promise.all([
      stat(join(a, "usr", "bin", "tool")),
      stat(join(b, "usr", "bin", "tool")),
    ]);
    expect(tb.ino).toBe(ta.ino);
    expect(tb.nlink).toBe(3); // a's, b's and the store's
    expect(tb.mode & 0o777).toBe(0o755);
    expect(tb.mtime.toISOString()).toBe("2026-01-01T00:00:00.000Z");
    expect(await readFile(join(b, "etc", "own"), "utf8")).toBe("b's own\n");
    expect((await stat(join(b, "etc", "own"))).ino).not.toBe((await stat(join(a, "etc", "own"))).ino);

    // Sharing again changes nothing.
    const again = await shareFiles(b, store());
    expect(again).toEqual({ files: 4, bytesShared: 0, added: [] });
  });

  it("shares only files whose mode, owner and time are the same too", async () => {
    const c = await image("c", "a's own\n");
    await chmod(join(c, "etc", "os-release"), 0o600);
    const when = new Date("2026-02-01T00:00:00Z");
    await utimes(join(c, "etc", "own"), when, when);
    await shareFiles(c, store());
    const a = join(root, "a", "rootfs");
    expect((await stat(join(c, "etc", "os-release"))).ino).not.toBe(
      (await stat(join(a, "etc", "os-release"))).ino,
    );
    expect((await stat(join(c, "etc", "os-release"))).mode & 0o777).toBe(0o600);
    expect((await stat(join(c, "etc", "own"))).ino).not.toBe((await stat(join(a, "etc", "own"))).ino);
    expect((await stat(join(c, "usr", "bin", "tool"))).ino).toBe(
      (await stat(join(a, "usr", "bin", "tool"))).ino,
    );
  });

  it("sweeps the copies no image links to any more, and only those", async () => {
    const d = await image("d", "d's own\n");
    const shared = await shareFiles(d, store());
    expect(shared.added).toHaveLength(1);
    await rm(join(root, "d"), { recursive: true });
    expect(await sweepStore(store(), shared.added)).toBe("d's own\n".length);
    // The rest of the store is still linked from a, b and c.
    expect(await sweepStore(store())).toBe(0);
    await rm(join(root, "b"), { recursive: true });
    expect(await sweepStore(store())).toBe("b's own\n".length);
    expect(await readFile(join(root, "a", "rootfs", "usr", "bin", "tool"), "utf8")).toContain("echo tool");
  });
});
