/**
 * The scripted upstream's stand-in tokenizer: one token per Unicode code point of a ChatML rendering.
 * What matters for tests is the property a real tokenizer with a chat template has: the prompt of
 * a follow-up call starts with the previous prompt plus the previous completion, exactly.
 */

interface WireMessage {
  role?: unknown;
  content?: unknown;
  tool_calls?: unknown;
}

/** `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, with the arguments as sent. */
export function renderToolCall(name: string, args: string): string {
  return `<tool_call>{"name":${JSON.stringify(name)},"arguments":${args}}</tool_call>`;
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part?.text === "string" ? part.text : "")).join("");
  }
  return "";
}

function renderAssistantBody(message: WireMessage): string {
  let body = contentText(message.content);
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls) {
      const fn = (call as { function?: { name?: string; arguments?: string } }).function ?? {};
      body += renderToolCall(fn.name ?? "", fn.arguments ?? "");
    }
  }
  return body;
}

/** The prompt text of a chat request: every message, then the opening of the assistant's turn. */
export function renderPrompt(messages: WireMessage[]): string {
  let text = "";
  for (const m of messages) {
    const role = typeof m.role === "string" ? m.role : "user";
    const body = role === "assistant" ? renderAssistantBody(m) : contentText(m.content);
    text += `<|im_start|>${role}\n${body}<|im_end|>\n`;
  }
  return `${text}<|im_start|>assistant\n`;
}

/** The completion text: the reply's body and the end-of-turn marker. */
export function renderCompletion(text: string, calls: { name: string; arguments: string }[]): string {
  return `${text}${calls.map((c) => renderToolCall(c.name, c.arguments)).join("")}<|im_end|>`;
}

export function tokenize(text: string): number[] {
  return Array.from(text, (ch) => ch.codePointAt(0) ?? 0);
}

/** A deterministic, plausible logprob for the i-th sampled token. */
export function fakeLogprob(i: number): number {
  return -0.01 * ((i % 7) + 1);
}
