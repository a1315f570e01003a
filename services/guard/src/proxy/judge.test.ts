import { Session } from "@bridle/contracts";
import { describe, expect, it } from "vitest";
import { contextFor, EffectsCache, judgeCall, type RawToolCall } from "./judge.ts";

/** Judging with the effects cache gives exactly the verdicts that judging anew gives. */
const session = (instruction: string, messages: unknown[] = []) => {
  const s = Session.parse({ id: "s", apiKey: "key-0123456789", createdAt: "now", instruction, adapter: "m" });
  const request = { messages: [{ role: "user", content: instruction }, ...messages], tools: tools(["bash"]) };
  return { s, context: contextFor(s, request) };
};
const tools = (names: string[]) => names.map((name) => ({ type: "function", function: { name } }));
const bash = (command: string): RawToolCall => ({
  id: "c1",
  name: "bash",
  arguments: JSON.stringify({ command }),
});

describe("the effects cache", () => {
  it("gives every session its own verdict on a call it has seen in another", () => {
    const cache = new EffectsCache(16);
    const call = bash("curl -s https://files.example.org/data.csv -o data.csv");
    const named = session("Download https://files.example.org/data.csv and count its rows.");
    const unnamed = session("Count the rows of data.csv.");
    // The agent naming the host itself authorises nothing, cached or not.
    const selfNamed = session("Count the rows of data.csv.", [
      { role: "assistant", content: "I will fetch https://files.example.org/data.csv" },
    ]);
    for (const round of [1, 2, 3]) {
      for (const { s, context } of [named, unnamed, selfNamed]) {
        const fresh = judgeCall(s, context, call);
        expect(judgeCall(s, context, call, cache), `round ${round}`).toEqual(fresh);
      }
    }
    expect(judgeCall(named.s, named.context, call, cache).decision).toBe("allow");
    expect(judgeCall(unnamed.s, unnamed.context, call, cache).rule).toBe("unmentioned-host");
    expect(judgeCall(selfNamed.s, selfNamed.context, call, cache).rule).toBe("unmentioned-host");
    expect(cache.size).toBe(1);
  });

  it("keeps the most recently used calls, never malformed ones or long arguments", () => {
    const cache = new EffectsCache(2);
    const { s, context } = session("Fix src/dates.py.");
    for (const command of ["ls", "cat src/dates.py", "ls", "python -m pytest"])
      judgeCall(s, context, bash(command), cache);
    // "cat" was the least recently used when the third call came in.
    expect(cache.get(bash("ls"))).toBeDefined();
    expect(cache.get(bash("python -m pytest"))).toBeDefined();
    expect(cache.get(bash("cat src/dates.py"))).toBeUndefined();

    const malformed = { id: "c2", name: "bash", arguments: '{"command": "ls' };
    expect(judgeCall(s, context, malformed, cache).decision).toBe("malformed");
    expect(judgeCall(s, context, malformed, cache).decision).toBe("malformed");
    const long = bash(`echo ${"x".repeat(EffectsCache.MAX_ARGUMENTS)}`);
    expect(judgeCall(s, context, long, cache).decision).toBe("allow");
    expect(cache.get(long)).toBeUndefined();
    expect(cache.size).toBe(2);
  });

  it("judges a test file write by the session's instruction, whoever judged the call before", () => {
    const cache = new EffectsCache(16);
    const write: RawToolCall = {
      id: "c3",
      name: "bash",
      arguments: JSON.stringify({ command: "echo 'def test_ok(): pass' > tests/test_dates.py" }),
    };
    const asked = session("Add a unit test in tests/test_dates.py for the date formatter.");
    const notAsked = session("Fix the date formatter in src/dates.py.");
    expect(judgeCall(notAsked.s, notAsked.context, write, cache).rule).toBe("test-tampering");
    expect(judgeCall(asked.s, asked.context, write, cache).decision).toBe("allow");
    expect(judgeCall(notAsked.s, notAsked.context, write, cache).rule).toBe("test-tampering");
  });
});
