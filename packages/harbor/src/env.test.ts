import { describe, expect, it } from "vitest";
import { envReferences, resolveTaskEnv } from "./env.ts";

describe("a task's ${VAR} references", () => {
  const source = { OPENAI_API_KEY: "sk-user", BRIDLE_API_TOKEN: "stack-secret", EMPTY: "" };

  it("resolve only from the variables the user allows, defaults included", () => {
    const env = { KEY: "${OPENAI_API_KEY}", MODE: "${MODE:-fast}", PLAIN: "x", BOTH: "${EMPTY}-${MODE:-a}" };
    expect(envReferences(env)).toEqual(["EMPTY", "MODE", "OPENAI_API_KEY"]);
    expect(resolveTaskEnv(env, ["OPENAI_API_KEY", "EMPTY"], source)).toEqual({
      ok: true,
      env: { KEY: "sk-user", MODE: "fast", PLAIN: "x", BOTH: "-a" },
    });
  });

  it("never read a variable that is not allowed, naming it, even when it is set", () => {
    expect(resolveTaskEnv({ T: "${BRIDLE_API_TOKEN}" }, [], source)).toEqual({
      ok: false,
      problem:
        "env T reads ${BRIDLE_API_TOKEN}, which the task may not read: allow it by name in BRIDLE_TASK_ENV_ALLOW",
    });
    // A default stands in for a variable the task may not read.
    expect(resolveTaskEnv({ T: "${BRIDLE_API_TOKEN:-none}" }, [], source)).toEqual({
      ok: true,
      env: { T: "none" },
    });
    expect(resolveTaskEnv({ T: "${UNSET}" }, ["UNSET"], source)).toEqual({
      ok: false,
      problem: "env T reads ${UNSET}, which is not set",
    });
  });
});
