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

/**
 * Writes the answer as OpenAI chat-completion chunks: text at once, each tool call whole. Every
 * chunk shares its envelope (id, created, model), so the envelope is serialised once per answer
 * and each text chunk costs one `JSON.stringify` of its text: serialising the whole chunk object
 * per delta was the largest part of the guard's own CPU time per answer.
 */
export class OpenAIStreamWriter implements Sink {
  private readonly id = `chatcmpl-${randomUUID()}`;
  private readonly created = Math.floor(Date.now() / 1000);
  private started = false;
  /** `data: {...,"choices":[{"index":0,"delta":` for this answer's model, built on first use. */
  private head: string | undefined;

  constructor(
    private readonly write: (text: string) => void,
    private readonly model: string,
    private readonly includeUsage: boolean,
  ) {}

  /** The chunk's text, byte for byte what `JSON.stringify` gives for the whole chunk object. */
  private envelope(model: string): string {
    return `data: {"id":${JSON.stringify(this.id)},"object":"chat.completion.chunk","created":${this.created},"model":${JSON.stringify(model)},"choices":[{"index":0,"delta":`;
  }

  /** Writes one chunk whose delta is already serialised JSON. */
  private chunkJson(deltaJson: string, finish: string | null = null, model = this.model): void {
    if (!this.started) {
      this.started = true;
      this.chunkJson(ROLE_DELTA);
    }
    if (this.head === undefined) this.head = this.envelope(this.model);
    const head = model === this.model ? this.head : this.envelope(model);
    this.write(
      `${head}${deltaJson},"finish_reason":${finish === null ? "null" : JSON.stringify(finish)}}]}\n\n`,
    );
  }

  text(delta: string): void {
    this.chunkJson(`{"content":${JSON.stringify(delta)}}`);
  }
  toolCall(call: RawToolCall, index: number): void {
    this.chunkJson(
      JSON.stringify({
        tool_calls: [
          { index, id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } },
        ],
      }),
    );
  }
  finish(reason: string | null, usage: Usage | null, model: string): void {
    this.chunkJson("{}", reason ?? "stop", model);
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

const ROLE_DELTA = JSON.stringify({ role: "assistant", content: "" });

function openaiUsage(u: Usage) {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
  };
}
