import { readdirSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EnvironmentImages, ImageBuildError } from "./index.ts";

/**
 * Images that travel between hosts: one packed where it was built (`pack`), taken in where it was
 * not (`adopt`, `find` with a source). No engine is needed: the image here is a folder as a built
 * one is laid out (its description and its filesystem), packed and unpacked with the real tar.
 */
const A = "a".repeat(64);
const B = "b".repeat(64);
let root: string;
let built: EnvironmentImages;

/** Another host's image home, empty. */
const fresh = async (source?: (digest: string) => Promise<Readable | null>) => {
  const home = await mkdtemp(join(root, "host-"));
  return Object.assign(new EnvironmentImages({ home, source }), { home });
};

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "bridle-adopt-"));
  const home = join(root, "built");
  const dir = join(home, "images", A);
  await mkdir(join(dir, "rootfs", "etc"), { recursive: true });
  await writeFile(join(dir, "rootfs", "etc", "build-id"), "abc123");
  // Where the engine's export puts the image's device nodes (a plain file stands for one here).
  await mkdir(join(dir, "rootfs", "dev"));
  await writeFile(join(dir, "rootfs", "dev", "null"), "");
  await writeFile(
    join(dir, "image.json"),
    JSON.stringify({
      digest: A,
      tag: "localhost/bridle/env:a",
      env: { MODE: "x" },
      workdir: "/srv",
      substitutions: [],
    }),
  );
  built = new EnvironmentImages({ home });
});

afterAll(() => rm(root, { recursive: true, force: true }));

describe("an image taken in from the host that built it", () => {
  it("unpacks what the other host packed, and finds it from then on", async () => {
    const here = await fresh();
    expect(await built.pack(B)).toBeNull(); // not built there
    const image = await here.adopt(A, (await built.pack(A))!);
    expect(image).toMatchObject({ digest: A, env: { MODE: "x" }, workdir: "/srv" });
    expect(await readFile(join(image.rootfs, "etc", "build-id"), "utf8")).toBe("abc123");
    expect(await here.lookup(A)).toMatchObject({ digest: A });
    expect(readdirSync(join(here.home, "images"))).toEqual([A]);
    // Every sandbox mounts a /dev of its own over the image's, and making device nodes needs
    // mknod, which a host may deny even to root: they stay behind.
    expect(readdirSync(join(image.rootfs, "dev"))).toEqual([]);
  });

  it("fetches once for rollouts that ask together, and answers null when the source has none", async () => {
    let asked = 0;
    const here = await fresh(async (digest) => {
      asked++;
      return digest === A ? built.pack(A) : null;
    });
    const [one, two] = await Promise.all([here.find(A), here.find(A)]);
    expect(one?.digest).toBe(A);
    expect(two?.digest).toBe(A);
    expect(await here.find(A)).toMatchObject({ digest: A });
    expect(asked).toBe(1);
    expect(await here.find(B)).toBeNull();
  });

  it("refuses an archive of another image, and one that breaks off, keeping nothing", async () => {
    const here = await fresh();
    await expect(here.adopt(B, (await built.pack(A))!)).rejects.toThrow(
      new ImageBuildError(`the archive of image ${B} describes image ${A}`),
    );
    const whole: Buffer[] = [];
    for await (const chunk of (await built.pack(A))!) whole.push(chunk as Buffer);
    const broken = Readable.from(
      (async function* () {
        yield Buffer.concat(whole).subarray(0, 1024);
        throw new Error("the connection broke off");
      })(),
    );
    await expect(here.adopt(A, broken)).rejects.toThrow(/broke off/);
    expect(readdirSync(join(here.home, "images"))).toEqual([]);
    expect(await here.lookup(A)).toBeNull();
    expect(await here.lookup(B)).toBeNull();
  });
});
