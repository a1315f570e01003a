import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HarnessCheck } from "@bridle/contracts";
import { loadStackConfig } from "@bridle/stack";
import { afterAll, describe, expect, it } from "vitest";
import { harnessCheck, harnessChecksDir } from "./harness-check.ts";

/**
 * `bridle harness check` on the pinned harnesses, as CI runs it: each harness unmodified in the
 * sandbox, through the real guard, tasks, verifier and runner services, against the check's
 * scripted model server (a TEST DOUBLE for the model: the check's fixed script of sessions).
 */
const data = mkdtempSync(join(tmpdir(), "bridle-harness-check-test-"));
const config = loadStackConfig({ ...process.env, BRIDLE_DATA: data });
afterAll(() => rmSync(data, { recursive: true, force: true }));
const lines: string[] = [];
const say = (line: string) => lines.push(line);

describe("the conformance check of each pinned harness version", () => {
  it("passes for pi, OpenCode, Hermes and Claude Code, and stores each result by version", async () => {
    const results = await harnessCheck(
      config,
      ["pi", "opencode", "hermes", "claude-code"],
      { portBase: 19760 },
      say,
    );
    console.info(lines.join("\n"));
    for (const result of results) {
      const failed = result.properties.filter((p) => !p.passed);
      expect(failed, `${result.harness}: ${JSON.stringify(failed)}`).toEqual([]);
      expect(result.properties.map((p) => p.name)).toEqual([
        "completes",
        "counts",
        "round-trip",
        "prefix",
        "crash-reported",
        "timeout-reported",
      ]);
      expect(result.streaming).toBe(true);
      expect(result.usage).toBe(true);
      // The first call opens the conversation; every later one extends it.
      expect(result.stitching["new-branch"]).toBe(1);
      const file = join(harnessChecksDir(config), `${result.harness}@${result.version}.json`);
      expect(HarnessCheck.parse(JSON.parse(readFileSync(file, "utf8")))).toEqual(result);
    }
  }, 900_000);

  it("fails on a deliberately broken configuration, naming the property and why", async () => {
    // OpenCode told its context holds 1,024 tokens compacts its history before every call: the
    // calls no longer extend each other, and the session never finishes its task.
    const [result] = await harnessCheck(
      config,
      ["opencode"],
      { portBase: 19760, contextWindow: 1024, solveTimeoutSec: 60 },
      say,
    );
    expect(result!.passed).toBe(false);
    const prefix = result!.properties.find((p) => p.name === "prefix")!;
    expect(prefix.passed).toBe(false);
    expect(prefix.detail).toMatch(/starts a new branch/);
    expect(result!.properties.find((p) => p.name === "crash-reported")!.passed).toBe(true);
    expect(existsSync(join(harnessChecksDir(config), `opencode@${result!.version}.json`))).toBe(true);
  }, 600_000);

  it("refuses a harness it does not know, naming the ones it does", async () => {
    await expect(harnessCheck(config, ["nope"], { portBase: 19760 }, say)).rejects.toThrow(
      /no harness 'nope' \(one of pi, opencode, hermes, claude-code, or all\)/,
    );
  });
});
