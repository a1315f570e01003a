import { randomUUID } from "node:crypto";
import type { Sink, Usage } from "./exchange.ts";
import type { RawToolCall } from "./judge.ts";

/** Collects a non-streamed answer and renders it as an OpenAI chat completion. */
export class OpenAICollector implements Sink {
  private content = "";
  private calls: RawToolCall[] = [];
  private result: unknown;
  failure: string | undefined;

  text(delta: string): void {
    this.content += delta;
  }
  toolCall(call: RawToolCall): void {
    this.calls.push(call);
  }
  finish(reason: string | null, usage: Usage | null, model: string): void {
    this.result = {
      id: `chatcmpl-${randomUUID()}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: this.content.length > 0 ? this.content : null,
            ...(this.calls.length > 0
              ? {
                  tool_calls: this.calls.map((c) => ({
                    id: c.id,
                    type: "function",
                    function: { name: c.name, arguments: c.arguments },
                  })),
                }
              : {}),
          },
          finish_reason: reason,
        },
      ],
      ...(usage ? { usage: openaiUsage(usage) } : {}),
    };
  }
  fail(message: string): void {
    this.failure = message;
  }
  body(): unknown {
    return this.result;
  }
}

/** Writes the answer as OpenAI chat-completion chunks: text at once, each tool call whole. */
export class OpenAIStreamWriter implements Sink {
  private readonly id = `chatcmpl-${randomUUID()}`;
  private readonly created = Math.floor(Date.now() / 1000);
  private started = false;

  constructor(
    private readonly write: (text: string) => void,
    private readonly model: string,
    private readonly includeUsage: boolean,
  ) {}

  private chunk(delta: unknown, finish: string | null = null, model = this.model): void {
    if (!this.started && delta !== null) {
      this.started = true;
      this.chunk({ role: "assistant", content: "" });
    }
    const body = {
      id: this.id,
      object: "chat.completion.chunk",
      created: this.created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    };
    this.write(`data: ${JSON.stringify(body)}\n\n`);
  }

  text(delta: string): void {
    this.chunk({ content: delta });
  }
  toolCall(call: RawToolCall, index: number): void {
    this.chunk({
      tool_calls: [
        { index, id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } },
      ],
    });
  }
  finish(reason: string | null, usage: Usage | null, model: string): void {
    this.chunk({}, reason ?? "stop", model);
    if (this.includeUsage && usage) {
      const body = {
        id: this.id,
        object: "chat.completion.chunk",
        created: this.created,
        model,
        choices: [],
        usage: openaiUsage(usage),
      };
      this.write(`data: ${JSON.stringify(body)}\n\n`);
    }
    this.write("data: [DONE]\n\n");
  }
  fail(message: string): void {
    // The OpenAI SDKs raise an APIError for a data event carrying `error`; no [DONE] follows.
    this.write(
      `data: ${JSON.stringify({ error: { message, type: "upstream_error", code: "upstream_stream_cut" } })}\n\n`,
    );
  }
}

function openaiUsage(u: Usage) {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
  };
}
