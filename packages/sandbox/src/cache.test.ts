import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnvironmentImages, imageCacheBytes, Sandbox } from "./index.ts";

const MiB = 2 ** 20;
const digest = (c: string) => c.repeat(64);
let root: string;
let built: EnvironmentImages;

/** An image as another host built it: 1 MiB of its own, and 0.5 MiB every image has. */
async function image(c: string): Promise<void> {
  const dir = join(root, "built", "images", digest(c));
  await mkdir(join(dir, "rootfs", "usr", "lib"), { recursive: true });
  await writeFile(join(dir, "rootfs", "own.bin"), Buffer.alloc(MiB, c));
  const shared = join(dir, "rootfs", "usr", "lib", "libshared.so");
  await writeFile(shared, Buffer.alloc(MiB / 2, "s"));
  await utimes(shared, new Date("2026-01-01"), new Date("2026-01-01"));
  const meta = {
    digest: digest(c),
    tag: `localhost/bridle/env:${c}`,
    env: {},
    workdir: null,
    substitutions: [],
  };
  await writeFile(join(dir, "image.json"), JSON.stringify(meta));
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "bridle-cache-"));
  for (const c of "abcd") await image(c);
  built = new EnvironmentImages({ home: join(root, "built"), maxCacheBytes: 2 ** 40 });
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe("the image cache's bound", () => {
  it("removes the images used longest ago past it, never one a live sandbox runs on, and their files with them", async () => {
    const home = join(root, "here");
    const images = new EnvironmentImages({ home, maxCacheBytes: 2.5 * MiB, keepUsedWithinMs: 0 });
    const take = async (c: string, usedAt: string) => {
      await images.adopt(digest(c), (await built.pack(digest(c)))!);
      await utimes(join(home, "images", digest(c), "used"), new Date(usedAt), new Date(usedAt));
    };
    await take("a", "2026-03-01");
    await take("b", "2026-03-02"); // 1 + 1 own, 0.5 shared once: at the bound, nothing removed
    expect(readdirSync(join(home, "images")).sort()).toEqual([digest("a"), digest("b")]);

    // A sandbox on a, the one used longest ago: b goes instead.
    const box = await Sandbox.create({
      baseDir: join(root, "boxes"),
      image: (await images.lookup(digest("a")))!,
    });
    await utimes(join(home, "images", digest("a"), "used"), new Date("2026-03-01"), new Date("2026-03-01"));
    await take("c", "2026-03-03");
    expect(readdirSync(join(home, "images")).sort()).toEqual([digest("a"), digest("c")]);

    // Once it is disposed, a goes, and only its own file leaves the store.
    await box.dispose();
    await take("d", "2026-03-04");
    expect(readdirSync(join(home, "images")).sort()).toEqual([digest("c"), digest("d")]);
    const store = readdirSync(join(home, "files"), { recursive: true, withFileTypes: true }).filter((e) =>
      e.isFile(),
    );
    expect(store).toHaveLength(3); // c's, d's, and the shared one
    expect(existsSync(join(home, "images", digest("c"), "rootfs", "usr", "lib", "libshared.so"))).toBe(true);
  });

  it("reads its size from BRIDLE_IMAGE_CACHE_GB, 40 GiB by default, and names a bad one", () => {
    expect(imageCacheBytes({})).toBe(40 * 2 ** 30);
    expect(imageCacheBytes({ BRIDLE_IMAGE_CACHE_GB: "2.5" })).toBe(2.5 * 2 ** 30);
    expect(() => imageCacheBytes({ BRIDLE_IMAGE_CACHE_GB: "lots" })).toThrow(
      "BRIDLE_IMAGE_CACHE_GB=lots: not a positive number of GiB",
    );
  });
});
