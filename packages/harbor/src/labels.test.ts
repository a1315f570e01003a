import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { labelsOf, parseTaskToml, recordLabels, splitFor } from "./index.ts";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-labels-"));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

const original = `# a comment that must survive
version = "1.0"

[metadata]
category = "build"

[metadata.repo2env.evaluation]
status = "unverified"
stage = "generation"

[verifier]
timeout_sec = 30
`;

describe("evaluation labels", () => {
  it("records labels in task.toml, replacing the old table and keeping the rest", async () => {
    await writeFile(join(dir, "task.toml"), original);
    await recordLabels(dir, {
      status: "needs_repair",
      stage: "controls",
      reasonCodes: ["oracle_failed"],
      evidence: 'oracle: "0"',
    });
    const text = await readFile(join(dir, "task.toml"), "utf8");
    expect(text).toContain("# a comment that must survive");
    expect(text.match(/\[metadata\.repo2env\.evaluation\]/g)).toHaveLength(1);
    const parsed = parseTaskToml(text);
    if (!parsed.ok) throw new Error(parsed.problems.join("; "));
    expect(parsed.toml.verifier.timeout_sec).toBe(30);
    expect(labelsOf(parsed.toml)).toEqual({
      status: "needs_repair",
      stage: "controls",
      reasonCodes: ["oracle_failed"],
      evidence: 'oracle: "0"',
    });
  });

  it("reads no labels from a task.toml without them, and rejects unknown statuses by field", () => {
    const plain = parseTaskToml('[metadata]\ncategory = "qa"\n');
    expect(plain.ok && labelsOf(plain.toml)).toBeNull();
    const bad = parseTaskToml(
      '[metadata]\ncategory = "qa"\n[metadata.repo2env.evaluation]\nstatus = "great"\nstage = "complete"\n',
    );
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.problems[0]).toMatch(/^task\.toml: metadata\.repo2env\.evaluation\.status: /);
  });
});

describe("splitFor", () => {
  it("is deterministic, follows the ratio, and yields to an override", () => {
    const ids = Array.from({ length: 2000 }, (_, i) => `task-${i}`);
    const heldOut = ids.filter((id) => splitFor(id, 0.2) === "held-out").length;
    expect(heldOut / ids.length).toBeGreaterThan(0.17);
    expect(heldOut / ids.length).toBeLessThan(0.23);
    expect(ids.map((id) => splitFor(id, 0.2))).toEqual(ids.map((id) => splitFor(id, 0.2)));
    expect(splitFor("task-1", 0)).toBe("train");
    expect(splitFor("task-1", 1)).toBe("held-out");
    expect(splitFor("task-1", 1, "train")).toBe("train");
  });
});
