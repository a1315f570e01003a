import { ServiceError } from "@bridle/service-kit";

type Block = {
  type?: string;
  text?: unknown;
  id?: unknown;
  name?: unknown;
  input?: unknown;
  tool_use_id?: unknown;
  content?: unknown;
  is_error?: unknown;
};
type OpenAIMessage = Record<string, unknown>;

/**
 * Translates an Anthropic Messages request into an OpenAI chat request for the model server:
 * system prompt, text, `tool_use` -> `tool_calls`, `tool_result` -> `tool` messages, tools and
 * tool_choice, sampling settings. Claude Code's non-standard `{"role":"system"}` entries inside
 * `messages` become system messages. Images and documents are refused by name (the served models
 * read text only).
 */
export function toOpenAIRequest(body: Record<string, unknown>): Record<string, unknown> {
  if (!Array.isArray(body.messages)) throw bad("`messages` must be an array of messages");
  if (typeof body.max_tokens !== "number" || !Number.isInteger(body.max_tokens) || body.max_tokens < 1) {
    throw bad("`max_tokens` must be a positive integer");
  }
  const messages: OpenAIMessage[] = [];
  const system = textOf(body.system, "system");
  if (system) messages.push({ role: "system", content: system });
  for (const [i, raw] of body.messages.entries()) messages.push(...translateMessage(raw, i));

  const out: Record<string, unknown> = { messages, max_tokens: body.max_tokens };
  for (const [from, to] of [
    ["temperature", "temperature"],
    ["top_p", "top_p"],
    ["top_k", "top_k"],
    ["stop_sequences", "stop"],
  ] as const) {
    if (body[from] !== undefined) out[to] = body[from];
  }
  if (Array.isArray(body.tools)) {
    const tools = body.tools.flatMap(
      (t: { name?: unknown; description?: unknown; input_schema?: unknown }) =>
        // Server-side tools (web search and the like) have no input_schema and no upstream equivalent.
        typeof t?.name === "string" && t.input_schema
          ? [
              {
                type: "function",
                function: { name: t.name, description: t.description ?? "", parameters: t.input_schema },
              },
            ]
          : [],
    );
    if (tools.length > 0) out.tools = tools;
  }
  const choice = body.tool_choice as { type?: string; name?: string } | undefined;
  if (choice?.type === "auto") out.tool_choice = "auto";
  else if (choice?.type === "any") out.tool_choice = "required";
  else if (choice?.type === "none") out.tool_choice = "none";
  else if (choice?.type === "tool" && choice.name)
    out.tool_choice = { type: "function", function: { name: choice.name } };
  return out;
}

function translateMessage(raw: unknown, i: number): OpenAIMessage[] {
  const m = raw as { role?: unknown; content?: unknown };
  if (typeof m !== "object" || m === null) throw bad(`messages.${i} must be an object`);
  if (m.role === "system") return [{ role: "system", content: textOf(m.content, `messages.${i}.content`) }];
  if (m.role !== "user" && m.role !== "assistant")
    throw bad(`messages.${i}.role must be "user" or "assistant"`);
  if (typeof m.content === "string") return [{ role: m.role, content: m.content }];
  if (!Array.isArray(m.content)) throw bad(`messages.${i}.content must be a string or an array of blocks`);
  const blocks = m.content as Block[];
  if (m.role === "assistant") {
    const text = blocks
      .filter((b) => b.type === "text")
      .map((b) => String(b.text ?? ""))
      .join("");
    const calls = blocks
      .filter((b) => b.type === "tool_use")
      .map((b) => ({
        id: String(b.id),
        type: "function",
        function: { name: String(b.name), arguments: JSON.stringify(b.input ?? {}) },
      }));
    return [{ role: "assistant", content: text, ...(calls.length > 0 ? { tool_calls: calls } : {}) }];
  }
  const out: OpenAIMessage[] = [];
  const text: string[] = [];
  blocks.forEach((b, j) => {
    if (b.type === "tool_result") {
      const content = textOf(b.content, `messages.${i}.content.${j}.content`);
      out.push({
        role: "tool",
        tool_call_id: String(b.tool_use_id),
        content: b.is_error ? `Error: ${content}` : content,
      });
    } else if (b.type === "text") text.push(String(b.text ?? ""));
    else if (b.type === "image" || b.type === "document") {
      throw bad(
        `messages.${i}.content.${j}: ${b.type} blocks are not supported (the served model reads text only)`,
      );
    }
  });
  if (text.length > 0) out.push({ role: "user", content: text.join("\n") });
  return out;
}

/** Text of a string or of a list of text blocks (other block types dropped). */
function textOf(value: unknown, where: string): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    return value
      .filter((b: Block) => b?.type === "text")
      .map((b: Block) => String(b.text ?? ""))
      .join("\n");
  }
  throw bad(`${where} must be a string or an array of text blocks`);
}

function bad(message: string): ServiceError {
  return new ServiceError(message, 400, "invalid_request_error", false);
}
