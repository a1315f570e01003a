import { type CaptureRecord, type Session, Trajectory } from "@bridle/contracts";
import { recordedTrajectory } from "@bridle/testkit";
import { describe, expect, it } from "vitest";
import { stitch } from "./trajectory.ts";

const session = { id: "s", mode: "block" } as Session;
const record = (seq: number, prompt: number[], completion: number[] | null, error: string | null = null) =>
  ({
    seq,
    sessionId: "s",
    api: "openai",
    stream: true,
    startedAt: "2026-01-01T00:00:00.000Z",
    durationMs: 1,
    adapter: "a",
    servedModel: completion ? "a" : null,
    servedBy: null,
    request: null,
    response: completion ? { content: "x", finishReason: "stop" } : null,
    toolCalls: [],
    notices: [],
    usage: null,
    promptTokenIds: completion ? prompt : null,
    completionTokenIds: completion,
    logprobs: completion ? completion.map(() => -1) : null,
    error,
  }) satisfies CaptureRecord;

describe("stitch", () => {
  it("follows token prefixes and ends the trajectory at the last call answered in full", () => {
    const t = stitch(session, [
      record(0, [1, 2], [3]),
      record(1, [1, 2, 3, 4], [5]),
      // The model server went away: the harness's next calls were refused, then it gave up.
      record(
        2,
        [1, 2, 3, 4, 5, 6],
        null,
        "model server unreachable at http://127.0.0.1:1: connect ECONNREFUSED",
      ),
      record(
        3,
        [1, 2, 3, 4, 5, 6],
        null,
        "model server unreachable at http://127.0.0.1:1: connect ECONNREFUSED",
      ),
    ]);
    expect(t.mainBranch).toEqual([0, 1]);
    expect(t.abandoned).toEqual([[2], [3]]);
    expect(t.stitchedBy).toBe("token-ids");
    // Call 1 extends call 0 token for token; the first call and the two refused ones start branches.
    expect(t.stitches).toEqual({ "token-ids": 1, messages: 0, "new-branch": 3 });
  });

  it("counts a call whose prompt re-renders the last answer as stitched by messages", () => {
    // As Qwen's chat template does: the model wrote a fenced JSON call, the next prompt shows it
    // inside <tool_call> tags, so the tokens part at the answer while the messages still extend.
    const withMessages = (r: CaptureRecord, messages: unknown[]) => ({ ...r, request: { messages } });
    const user = { role: "user", content: "make hello.txt" };
    const answer = { role: "assistant", content: "x" };
    const t = stitch(session, [
      withMessages(record(0, [1, 2], [3]), [user]),
      withMessages(record(1, [1, 2, 9, 4], [5]), [user, answer, { role: "tool", content: "ok" }]),
    ]);
    expect(t.mainBranch).toEqual([0, 1]);
    expect(t.stitchedBy).toBe("messages");
    expect(t.stitches).toEqual({ "token-ids": 0, messages: 1, "new-branch": 1 });
  });

  it("keeps the last call when none was answered", () => {
    const t = stitch(session, [record(0, [1], null, "refused"), record(1, [1], null, "refused")]);
    expect(t.mainBranch).toEqual([1]);
  });
});

describe("stitch on a trajectory recorded with the real model and tokenizer", () => {
  // Hermes on Qwen2.5-Coder-0.5B through vLLM (see @bridle/testkit's recordedTrajectory).
  const recorded = Trajectory.parse(recordedTrajectory("hermes-qwen2.5-coder-0.5b"));
  const [first, second, third] = recorded.records.filter((r) => r.promptTokenIds);

  it("stitches the recorded calls as the guard did when it served them", () => {
    const t = stitch({ id: recorded.sessionId, mode: "block" } as Session, recorded.records);
    expect(t.mainBranch).toEqual([1, 2, 3]);
    // The first call timed out before its first token and Hermes sent it again.
    expect(recorded.records[0]!.error).toMatch(/sent nothing/);
    expect(t.abandoned).toEqual([[0]]);
    expect(t.stitches).toEqual({ "token-ids": 0, messages: 2, "new-branch": 2 });
    expect(t).toEqual({ ...recorded, records: t.records });
  });

  it("joins by messages because the next prompt re-renders the answer, not because the prompt differs", () => {
    // Each later prompt repeats the earlier prompt token for token, then parts inside the model's
    // own answer: Hermes sends its tool call back re-serialised, so no call extends by token ids.
    for (const [earlier, later] of [
      [first!, second!],
      [second!, third!],
    ] as const) {
      const before = [...earlier.promptTokenIds!, ...earlier.completionTokenIds!];
      const after = later.promptTokenIds!;
      let same = 0;
      while (same < before.length && before[same] === after[same]) same++;
      expect(same).toBeGreaterThanOrEqual(earlier.promptTokenIds!.length);
      expect(same).toBeLessThan(before.length);
    }
  });
});
