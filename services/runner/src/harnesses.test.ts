import { readFileSync } from "node:fs";
import { join } from "node:path";
import { RolloutResult } from "@bridle/contracts";
import { checkMoves as moves } from "@bridle/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harnesses } from "./harnesses/index.ts";
import { startRolloutStack, SLUGIFY_TASK as TASK } from "./test-stack.ts";

/** A task whose compose service is an MCP server, offered through [[environment.mcp_servers]]. */
const MCP_TASK = join(import.meta.dirname, "..", "fixtures", "mcp-task");

let stack: Awaited<ReturnType<typeof startRolloutStack>>;
beforeAll(async () => {
  stack = await startRolloutStack(19710, [TASK, MCP_TASK]);
}, 600_000);
afterAll(() => stack?.stop());

async function rollout(harness: string, suffix: string, extra: Record<string, unknown> = {}) {
  const res = await stack.app.request("/v1/rollouts", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      rolloutId: `${harness}-${suffix}`,
      taskId: TASK,
      harness,
      model: "scripted-model",
      agentTimeoutSec: Number(process.env.BRIDLE_TEST_AGENT_TIMEOUT ?? 180),
      ...extra,
    }),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  if (process.env.DEBUG_ROLLOUT) console.log(JSON.stringify(await res.clone().json(), null, 1));
  return RolloutResult.parse(await res.json());
}

describe.each(Object.keys(moves))(
  "%s through the real guard and sandbox (scripted upstream model: a test double)",
  (harness) => {
    const m = moves[harness]!;

    // Solving a task, with the counts agreeing, is the conformance check's first session
    // (`bridle harness check`, infra/cli/src/commands/harness-check.test.ts).
    it("blocks a forbidden call (writing the verifier's reward): the harness runs nothing and the reward is 0", async () => {
      await stack.script([
        {
          tool_calls: [
            m.run("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && touch /app/ran.txt"),
          ],
        },
        { text: "Done." },
      ]);
      const result = await rollout(harness, "cheat");
      expect(result.blocked.length).toBe(1);
      expect(result.blocked[0]?.rule).toBe("test-tampering");
      expect(result.toolCalls.harness).toBe(0);
      expect(result.reward).toBe(0);
      expect(result.environmentFailure).toBeNull();
    });
  },
);

describe("claude-code through the real guard and sandbox (scripted upstream model: a test double)", () => {
  it("runs out of turns: the verifier scores what it left, it is no harness failure", async () => {
    const m = moves["claude-code"]!;
    await stack.script([
      { tool_calls: [m.read] },
      { tool_calls: [m.run("echo still looking")] },
      { tool_calls: [m.write] },
      { text: "Fixed." },
    ]);
    const result = await rollout("claude-code", "out-of-turns", { maxTurns: 2 });
    expect(result.environmentFailure).toBeNull();
    expect(result.stopReason).toBe("max_turns");
    expect(result.toolCalls.harness).toBe(2);
    expect(result.correctness).toBe(0); // the fix was never written
  });
});

describe("a task's MCP servers reach the harness's own MCP client (scripted upstream model: a test double)", () => {
  // What each harness calls the notes server's get_word tool.
  const tools: Record<string, string> = {
    "claude-code": "mcp__notes__get_word",
    opencode: "notes_get_word",
    hermes: "mcp__notes__get_word",
  };
  it.each(Object.keys(tools))(
    "%s offers the server's tool to the model, calls it by the service's name and hands its answer back",
    async (harness) => {
      const tool = tools[harness]!;
      await stack.script([
        { tool_calls: [{ name: tool, arguments: {} }] },
        { tool_calls: [moves[harness]!.run("printf compass > /app/word.txt")] },
        { text: "Done." },
      ]);
      const result = await rollout(harness, "mcp", { taskId: "mcp-task" });
      expect(result.environmentFailure).toBeNull();
      expect(result.blocked).toEqual([]);
      expect(result.correctness).toBe(1);
      const requests = (await (await fetch(`${stack.upstreamUrl}/_scripted/requests`)).json()) as {
        tools?: { function?: { name?: string } }[];
        messages?: { role: string; content: unknown }[];
      }[];
      // The harness listed the server's tools before the model's first turn.
      expect(requests.some((r) => (r.tools ?? []).some((t) => t.function?.name === tool))).toBe(true);
      // The word exists only in the MCP service's environment: a tool result holding it came from
      // the server, through the harness's MCP client, over the task's own network.
      const results = requests.flatMap((r) => (r.messages ?? []).filter((m) => m.role === "tool"));
      expect(results.some((m) => JSON.stringify(m.content).includes("compass"))).toBe(true);
    },
  );
});

describe("opencode's report of a session its own doom-loop guard ended", () => {
  it("is the model's doing, scored: no harness failure", () => {
    // OpenCode's own output from a real 0.5B rollout: the model wrote hello.txt three times in a
    // row, OpenCode asked permission to go on (doom_loop: ask), and the headless run refused it.
    const stdout = readFileSync(
      join(import.meta.dirname, "..", "fixtures", "harness-output", "opencode-doom-loop.jsonl"),
      "utf8",
    );
    const report = harnesses.opencode!.report({ stdout, stderr: "", exitCode: 1, home: "" });
    expect(report.error).toBeNull();
    expect(report.stopReason).toBe("permission_rejected");
    expect(report.toolCalls).toEqual(["write", "write", "write"]);
  });
});
