import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readReward } from "./verify.ts";

let logs: string;
beforeAll(async () => {
  logs = await mkdtemp(join(tmpdir(), "bridle-reward-"));
});
afterAll(async () => rm(logs, { recursive: true, force: true }));

const json = async (value: unknown, key?: string) => {
  await writeFile(join(logs, "reward.json"), typeof value === "string" ? value : JSON.stringify(value));
  return readReward(logs, key);
};

describe("reward.json as Harbor writes it", () => {
  it("uses `reward` when present and keeps every key", async () => {
    expect(await json({ reward: 0.5, tests_passed: 3 })).toEqual({
      value: 0.5,
      details: { reward: 0.5, tests_passed: 3 },
    });
  });

  it("else the task's reward key, else the mean of the keys", async () => {
    const graded = { correctness: 1, style: 0.5 };
    expect(await json(graded, "style")).toEqual({ value: 0.5, details: graded });
    expect(await json(graded)).toEqual({ value: 0.75, details: graded });
    expect(await json({ accuracy: 0.25 })).toEqual({ value: 0.25, details: { accuracy: 0.25 } });
  });

  it("names what is wrong with one it cannot read", async () => {
    expect(await json({ correctness: 1 }, "style")).toEqual({
      error: 'reward.json has no key "style" (the task\'s verifier.reward_key)',
    });
    expect(await json({})).toEqual({ error: "reward.json holds no number" });
    expect(await json({ reward: "1" })).toEqual({ error: "reward.json must map names to numbers" });
    expect(await json("[1]")).toEqual({ error: "reward.json is not an object" });
    expect(await json("{")).toEqual({ error: "reward.json is not valid JSON" });
  });
});
