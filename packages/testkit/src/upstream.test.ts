import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderPrompt, tokenize } from "./tokens.ts";
import { spawnScriptedUpstream } from "./upstream-process.ts";

type Proc = Awaited<ReturnType<typeof spawnScriptedUpstream>>;
let upstream: Proc;

const script = [
  { text: "Looking.", tool_calls: [{ name: "bash", arguments: { command: "ls -la" } }], chunk_chars: 3 },
  { text: "Done." },
  { text: "cut", tool_calls: [{ name: "bash", arguments: { command: "pytest" } }], cut_after_chunks: 3 },
  { tool_calls: [{ name: "bash", arguments: { command: "ls" } }], invalid_tool_json: true },
];

async function sse(res: Response): Promise<unknown[]> {
  const text = await res.text();
  return text
    .split("\n\n")
    .map((e) => e.replace(/^data: /, ""))
    .filter((d) => d.length > 0 && d !== "[DONE]")
    .map((d) => JSON.parse(d));
}

const post = (body: unknown) =>
  fetch(`${upstream.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

describe("scripted upstream (TEST DOUBLE for the model server), as its own process", () => {
  beforeAll(async () => {
    upstream = await spawnScriptedUpstream(script);
  });
  afterAll(() => upstream.stop());

  it("lists its model and replays turns in order, streaming tool calls as vLLM does", async () => {
    const models = (await (await fetch(`${upstream.url}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(["scripted-model"]);
    const messages = [{ role: "user", content: "hi" }];
    const chunks = (await sse(
      await post({ model: "m", messages, stream: true, return_token_ids: true, logprobs: true }),
    )) as {
      prompt_token_ids?: number[];
      choices: { delta: Record<string, unknown>; token_ids?: number[] }[];
    }[];
    expect(chunks[0]!.prompt_token_ids).toEqual(tokenize(renderPrompt(messages)));
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    const args = chunks
      .flatMap(
        (c) => (c.choices[0]?.delta.tool_calls as { function: { arguments?: string } }[] | undefined) ?? [],
      )
      .map((t) => t.function.arguments ?? "")
      .join("");
    expect(text).toBe("Looking.");
    expect(JSON.parse(args)).toEqual({ command: "ls -la" });
    const ids = chunks.flatMap((c) => c.choices[0]?.token_ids ?? []);
    expect(String.fromCodePoint(...ids)).toBe(
      'Looking.<tool_call>{"name":"bash","arguments":{"command":"ls -la"}}</tool_call><|im_end|>',
    );

    const plain = (await (await post({ model: "m", messages })).json()) as {
      choices: { message: { content: string } }[];
    };
    expect(plain.choices[0]!.message.content).toBe("Done.");
  });

  it("cuts a stream after N chunks and emits invalid tool-call JSON when scripted to", async () => {
    const res = await post({ model: "m", messages: [], stream: true });
    await expect(res.text()).rejects.toThrow();
    const bad = (await (await post({ model: "m", messages: [] })).json()) as {
      choices: { message: { tool_calls: { function: { arguments: string } }[] } }[];
    };
    expect(() => JSON.parse(bad.choices[0]!.message.tool_calls[0]!.function.arguments)).toThrow();
  });
});
