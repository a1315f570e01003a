import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { EnvironmentImages } from "@bridle/sandbox";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateFolder } from "./index.ts";
import { buildableImages, requireToolchain, toolchain } from "./test-support.ts";

/** Public tasks, unchanged (fixtures/real/SOURCES.md names each one's repository, commit and license). */
const real = resolve(import.meta.dirname, "../fixtures/real/tasks");
let images: EnvironmentImages;

let dir: string;
beforeAll(async () => {
  requireToolchain();
  images = await buildableImages();
  dir = await mkdtemp(join(tmpdir(), "bridle-real-"));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe("public Harbor and Terminal-Bench 1 tasks, unchanged", () => {
  it("build their images and pass both controls, their tests fetching uv and pytest offline", async () => {
    const verdicts = await validateFolder(real, { parallel: 1, repeats: 1, toolchain, images, baseDir: dir });
    expect(verdicts.map((v) => [v.id, v.problems])).toEqual([
      ["harbor-cookbook-multi-container", []],
      ["harbor-cookbook-multi-reward", []],
      ["harbor-cookbook-simple-task", []],
      ["terminal-bench-evoeval-0", []],
      ["terminal-bench-polyglot-python-affine-cipher", []],
    ]);
    for (const v of verdicts) {
      expect(v.ok).toBe(true);
      expect(v.controls?.runs.map((r) => [r.control, r.reward])).toEqual([
        ["oracle", 1],
        ["nop", 0],
      ]);
      // Every public base was stood in for by a local one, and the verdict says which.
      expect(v.notes.some((n) => / FROM .+ -> localhost\/bridle\//.test(n))).toBe(true);
    }
    // Aider-polyglot's Python tasks add deadsnakes' PPA on Ubuntu 22.04 for python3.11, which
    // Ubuntu 22.04's own archive has, and upgrade pip system-wide, as Ubuntu 22.04 (before PEP 668)
    // allows: the image is Ubuntu 22.04 itself.
    expect(verdicts.at(-1)?.notes).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /FROM buildpack-deps:jammy -> localhost\/bridle\/buildpack-deps:jammy \(Ubuntu 22\.04 /,
        ),
        expect.stringMatching(/add-apt-repository ppa:deadsnakes\/ppa -> left out/),
      ]),
    );
    // multi-container's API server runs beside the task's container, built from its own
    // Dockerfile: the solution reaches it by name (http://api-server:5000) on the network they share.
    expect(verdicts[0]?.services.map((s) => [s.name, s.healthcheck?.[0]])).toEqual([
      ["api-server", "python3"],
    ]);
    expect(verdicts[0]?.notes).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^service api-server: environment\/api-server\/Dockerfile built /),
        expect.stringMatching(
          /^service api-server: .*FROM python:3\.12-slim -> localhost\/bridle\/python:3\.12 /,
        ),
      ]),
    );
    // multi-reward's reward.json holds two keys (correctness, performance) and no `reward`: the
    // oracle's 1 is their mean, the nop's 0 too.
    // Five task images and a service's, and their bases on a fresh machine: 251 s here with the bases built.
  }, 1_200_000);
});
