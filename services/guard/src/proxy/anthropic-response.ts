import { randomUUID } from "node:crypto";
import type { Sink, Usage } from "./exchange.ts";
import type { RawToolCall } from "./judge.ts";

const STOP_REASONS: Record<string, string> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_use",
  function_call: "tool_use",
  content_filter: "refusal",
};
const stopReason = (reason: string | null) => STOP_REASONS[reason ?? "stop"] ?? "end_turn";

function inputOf(call: RawToolCall): unknown {
  try {
    return JSON.parse(call.arguments || "{}");
  } catch {
    return {};
  }
}

/** Collects a non-streamed answer and renders it as an Anthropic message. */
export class AnthropicCollector implements Sink {
  private readonly content: unknown[] = [];
  private result: unknown;
  failure: string | undefined;

  text(delta: string): void {
    const last = this.content.at(-1) as { type: string; text: string } | undefined;
    if (last?.type === "text") last.text += delta;
    else this.content.push({ type: "text", text: delta });
  }
  toolCall(call: RawToolCall): void {
    this.content.push({ type: "tool_use", id: call.id, name: call.name, input: inputOf(call) });
  }
  finish(reason: string | null, usage: Usage | null, model: string): void {
    this.result = {
      id: `msg_${randomUUID().replace(/-/g, "")}`,
      type: "message",
      role: "assistant",
      model,
      content: this.content,
      stop_reason: stopReason(reason),
      stop_sequence: null,
      usage: { input_tokens: usage?.promptTokens ?? 0, output_tokens: usage?.completionTokens ?? 0 },
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
 * Writes the answer as Anthropic stream events: `message_start`, one content block per text run or
 * tool call (`text_delta`, `input_json_delta`), `message_delta` with the stop reason, `message_stop`.
 */
export class AnthropicStreamWriter implements Sink {
  private index = -1;
  private open: "text" | undefined;
  private started = false;

  constructor(
    private readonly write: (text: string) => void,
    private readonly model: string,
  ) {}

  private event(type: string, data: Record<string, unknown>): void {
    this.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    this.event("message_start", {
      message: {
        id: `msg_${randomUUID().replace(/-/g, "")}`,
        type: "message",
        role: "assistant",
        model: this.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0 },
      },
    });
  }

  private closeBlock(): void {
    if (this.open) this.event("content_block_stop", { index: this.index });
    this.open = undefined;
  }

  text(delta: string): void {
    this.start();
    if (this.open !== "text") {
      this.closeBlock();
      this.index++;
      this.open = "text";
      this.event("content_block_start", { index: this.index, content_block: { type: "text", text: "" } });
    }
    // Built as text: the envelope is fixed, and serialising an object per delta was most of the cost.
    this.write(
      `event: content_block_delta\ndata: {"type":"content_block_delta","index":${this.index},"delta":{"type":"text_delta","text":${JSON.stringify(delta)}}}\n\n`,
    );
  }

  toolCall(call: RawToolCall): void {
    this.start();
    this.closeBlock();
    this.index++;
    this.event("content_block_start", {
      index: this.index,
      content_block: { type: "tool_use", id: call.id, name: call.name, input: {} },
    });
    this.event("content_block_delta", {
      index: this.index,
      delta: { type: "input_json_delta", partial_json: JSON.stringify(inputOf(call)) },
    });
    this.event("content_block_stop", { index: this.index });
  }

  finish(reason: string | null, usage: Usage | null): void {
    this.start();
    this.closeBlock();
    this.event("message_delta", {
      delta: { stop_reason: stopReason(reason), stop_sequence: null },
      usage: { input_tokens: usage?.promptTokens ?? 0, output_tokens: usage?.completionTokens ?? 0 },
    });
    this.event("message_stop", {});
  }

  fail(message: string): void {
    this.event("error", { error: { type: "api_error", message } });
  }
}
