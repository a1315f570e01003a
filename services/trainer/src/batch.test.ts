import { Trajectory, trainableCalls, unprovenCalls } from "@bridle/contracts";
import { recordedTrajectory } from "@bridle/testkit";
import { describe, expect, it } from "vitest";

describe("the trainer's batch from a trajectory", () => {
  // Recorded on a real rollout: Hermes on Qwen2.5-Coder-0.5B, whose first call timed out before its
  // first token and was sent again (an abandoned branch), then three calls joined by messages.
  const recorded = Trajectory.parse(recordedTrajectory("hermes-qwen2.5-coder-0.5b"));

  it("takes the stitched main branch only, each call with the tokens the model server saw", () => {
    expect(recorded.mainBranch).toEqual([1, 2, 3]);
    expect(recorded.abandoned).toEqual([[0]]);
    const calls = trainableCalls(recorded);
    const main = recorded.records.filter((r) => recorded.mainBranch.includes(r.seq));
    expect(calls.map((c) => c.promptTokenIds.length)).toEqual([12_861, 12_970, 13_138]);
    calls.forEach((call, i) => {
      expect(call.promptTokenIds).toEqual(main[i]!.promptTokenIds);
      expect(call.completionTokenIds).toEqual(main[i]!.completionTokenIds);
      expect(call.logprobs).toHaveLength(call.completionTokenIds.length);
      expect(call.logprobs.every((l) => l <= 0)).toBe(true);
    });
  });

  it("leaves out a main-branch call without token ids (nothing to train on), keeps the rest", () => {
    const stripped = {
      ...recorded,
      records: recorded.records.map((r) => (r.seq === 2 ? { ...r, promptTokenIds: null } : r)),
    };
    expect(trainableCalls(stripped).map((c) => c.promptTokenIds.length)).toEqual([12_861, 13_138]);
  });

  it("refuses a sample unless serving's registry named every main-branch call's server as the step's version", () => {
    const served = { model: "qwen/hermes/run@v2", version: 2 };
    const identity = {
      model: "qwen/hermes/run@v2",
      adapter: "qwen/hermes/run",
      version: 2,
      hash: "a".repeat(64),
    };
    const proven = { ...recorded, records: recorded.records.map((r) => ({ ...r, servedBy: identity })) };
    expect(unprovenCalls(proven, served)).toEqual([]);
    // The abandoned call (seq 0) is not trained on: what served it does not matter.
    const abandonedOther = {
      ...proven,
      records: proven.records.map((r) => (r.seq === 0 ? { ...r, servedBy: null } : r)),
    };
    expect(unprovenCalls(abandonedOther, served)).toEqual([]);
    const v1 = { ...identity, model: "qwen/hermes/run@v1", version: 1 };
    const mixed = {
      ...proven,
      records: proven.records.map((r) => (r.seq === 2 ? { ...r, servedBy: v1 } : r)),
    };
    expect(unprovenCalls(mixed, served)).toEqual([v1]);
    // Captured before the guard could ask serving: nothing proves what answered.
    expect(unprovenCalls(recorded, served)).toHaveLength(3);
  });
});
