import Anthropic from "@anthropic-ai/sdk";
import type { Trajectory } from "@bridle/contracts";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GuardHarness, openaiTools, startGuard } from "./test-support.ts";

/**
 * Bad input never crashes or hangs the guard: a real guard process, the scripted upstream process
 * (a TEST DOUBLE for vLLM) scripted to fail, and a guard whose upstream is down.
 */
let h: GuardHarness;
let down: GuardHarness;
let apiKey: string;
let sessionId: string;
const instruction = "Fix src/dates.py.";
const messages = [{ role: "user" as const, content: instruction }];

/** Reads a streamed answer to its end; the error that ended it, if one did. */
async function streamError(): Promise<unknown> {
  const stream = await openai(h).chat.completions.create({ model: "m", messages, stream: true });
  try {
    for await (const _ of stream) {
      // drain
    }
  } catch (err) {
    return err;
  }
  return undefined;
}

beforeAll(async () => {
  h = await startGuard(19331, {
    BODY_LIMIT_BYTES: "65536",
    UPSTREAM_IDLE_TIMEOUT_MS: "800",
    UPSTREAM_FIRST_EVENT_TIMEOUT_MS: "2500",
  });
  // Nothing listens on this port: the model server is down.
  down = await startGuard(19332, {}, { upstreamUrl: "http://127.0.0.1:19398" });
  ({ apiKey, id: sessionId } = await h.register({ instruction }));
});
afterAll(async () => {
  await h?.stop();
  await down?.stop();
});

const openai = (g: GuardHarness, key = apiKey) =>
  new OpenAI({ apiKey: key, baseURL: `${g.guardUrl}/v1`, maxRetries: 0 });
const anthropic = (g: GuardHarness, key = apiKey) =>
  new Anthropic({ apiKey: key, baseURL: g.guardUrl, maxRetries: 0 });
const post = (path: string, body: string, key = apiKey) =>
  fetch(`${h.guardUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body,
  });

describe("bad input to the guard", () => {
  it("answers malformed JSON and missing fields with a 400 that says what is wrong", async () => {
    const res = await post("/v1/chat/completions", '{"messages": [');
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("not valid JSON");
    const noMessages = await post("/v1/chat/completions", '{"model": "x"}');
    expect(((await noMessages.json()) as { error: { message: string } }).error.message).toContain(
      "`messages`",
    );
    const anth = await post("/v1/messages", JSON.stringify({ messages: [] }));
    expect(anth.status).toBe(400);
    expect(await anth.json()).toMatchObject({
      type: "error",
      error: { type: "invalid_request_error", message: expect.stringContaining("max_tokens") },
    });
  });

  it("refuses a body over the configured limit with 413", async () => {
    const res = await post(
      "/v1/chat/completions",
      JSON.stringify({ messages: [{ role: "user", content: "x".repeat(100_000) }] }),
    );
    expect(res.status).toBe(413);
  });

  it("ends the client's stream with an error event when the upstream cuts it mid-call, and records it", async () => {
    await h.setScript([
      {
        text: "Looking at the file now",
        tool_calls: [{ name: "bash", arguments: { command: "cat src/dates.py" } }],
        chunk_chars: 4,
        cut_after_chunks: 4,
      },
      {
        text: "Looking at the file now",
        tool_calls: [{ name: "bash", arguments: { command: "cat src/dates.py" } }],
        chunk_chars: 4,
        cut_after_chunks: 4,
      },
    ]);
    const stream = await openai(h).chat.completions.create({
      model: "m",
      messages,
      tools: openaiTools,
      stream: true,
    });
    let text = "";
    const err = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as Error).message).toContain("cut the stream");
    expect(text.length).toBeGreaterThan(0);

    const anthErr = await anthropic(h)
      .messages.stream({ model: "m", max_tokens: 100, messages })
      .finalMessage()
      .catch((e: unknown) => e);
    expect(anthErr).toBeInstanceOf(Error);
    expect(String(anthErr)).toContain("cut the stream");

    const trajectory = (await (
      await h.admin(`/admin/sessions/${sessionId}/trajectory`)
    ).json()) as Trajectory;
    const cut = trajectory.records.slice(-2);
    expect(cut.every((r) => r.error?.includes("cut the stream"))).toBe(true);
    expect(cut.every((r) => r.toolCalls.length === 0 || r.toolCalls.every((c) => !c.released))).toBe(true);
  });

  it("ends a stalled stream after the idle timeout instead of hanging", async () => {
    await h.setScript([{ text: "slow", chunk_chars: 1, delay_ms: 3_000 }]);
    const started = Date.now();
    const err = await streamError();
    expect(String(err)).toContain("sent nothing for 800 ms");
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it("waits longer for a stream's first event (the prompt's prefill) than between events, but not forever", async () => {
    // A harness's first prompt takes minutes to compute on a CPU before vLLM sends anything.
    await h.setScript([{ text: "computed", first_delay_ms: 1_500 }]);
    const slowStart = await openai(h).chat.completions.create({ model: "m", messages, stream: true });
    let text = "";
    for await (const chunk of slowStart) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("computed");

    await h.setScript([{ text: "never", first_delay_ms: 5_000 }]);
    const started = Date.now();
    const err = await streamError();
    expect(String(err)).toContain("sent no first event within 2500 ms");
    expect(Date.now() - started).toBeLessThan(4_500);
  }, 15_000);

  it("stops reading the upstream when the harness hangs up mid-stream, and records why", async () => {
    const { apiKey: key, id } = await h.register({ instruction });
    // 40 chunks 100 ms apart: read to its end, the answer would take 4 s.
    await h.setScript([{ text: "x".repeat(40), chunk_chars: 1, delay_ms: 100 }]);
    const hangUp = new AbortController();
    const res = await fetch(`${h.guardUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages, stream: true }),
      signal: hangUp.signal,
    });
    const first = await res.body!.getReader().read();
    expect(new TextDecoder().decode(first.value)).toContain("data: ");
    hangUp.abort();
    let records: Trajectory["records"] = [];
    for (let i = 0; i < 40 && records.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      records = ((await (await h.admin(`/admin/sessions/${id}/trajectory`)).json()) as Trajectory).records;
    }
    expect(records).toHaveLength(1);
    expect(records[0]!.error).toBe("the harness closed the connection");
    expect(records[0]!.durationMs).toBeLessThan(2_000);
  });

  it("withholds a tool call whose arguments are not valid JSON, with a notice that is not a violation", async () => {
    const { apiKey: key, id } = await h.register({ instruction });
    const turn = {
      text: "",
      tool_calls: [{ name: "bash", arguments: { command: "ls -la" } }],
      invalid_tool_json: true,
    };
    await h.setScript([turn, turn]);
    const plain = await openai(h, key).chat.completions.create({ model: "m", messages, tools: openaiTools });
    expect(plain.choices[0]!.message.tool_calls ?? []).toHaveLength(0);
    expect(plain.choices[0]!.message.content).toContain("arguments are not valid JSON");
    const stream = await openai(h, key).chat.completions.create({
      model: "m",
      messages,
      tools: openaiTools,
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) {
      expect(chunk.choices[0]?.delta.tool_calls ?? []).toHaveLength(0);
      text += chunk.choices[0]?.delta.content ?? "";
    }
    expect(text).toBe(plain.choices[0]!.message.content);
    const trajectory = (await (await h.admin(`/admin/sessions/${id}/trajectory`)).json()) as Trajectory;
    expect(trajectory.records.map((r) => r.toolCalls[0]?.decision)).toEqual(["malformed", "malformed"]);
    expect(trajectory.rewardZero).toBe(false);
  });

  it("answers a retryable 503 when the model server is down, in both APIs, and records the calls", async () => {
    const { apiKey: key, id: sessionId } = await down.register({ instruction });
    const err = await openai(down, key)
      .chat.completions.create({ model: "m", messages })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect((err as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({
      retryable: true,
      type: "upstream_unavailable",
    });
    const anthErr = await anthropic(down, key)
      .messages.create({ model: "m", max_tokens: 10, messages, stream: true })
      .catch((e: unknown) => e);
    expect(anthErr).toBeInstanceOf(Anthropic.APIError);
    expect((anthErr as InstanceType<typeof Anthropic.APIError>).status).toBe(503);
    // Both refused calls are in the session's record, with why.
    const trajectory = (await (
      await down.admin(`/admin/sessions/${sessionId}/trajectory`)
    ).json()) as Trajectory;
    expect(trajectory.records.map((r) => [r.api, r.response, r.error?.includes("unreachable")])).toEqual([
      ["openai", null, true],
      ["anthropic", null, true],
    ]);
    // Refused calls do not spend a call budget: a session of one call still reaches the model.
    const budget = await down.register({ instruction, maxCalls: 1 });
    for (let i = 0; i < 2; i++) {
      const refused = await openai(down, budget.apiKey)
        .chat.completions.create({ model: "m", messages })
        .catch((e: unknown) => e);
      expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(503); // not the closing answer
    }
    const health = await fetch(`${down.guardUrl}/healthz`);
    expect(health.ok).toBe(true);
  });
});
