import { z } from "zod";

/** One tool call a scripted turn makes. `arguments` as an object is sent as compact JSON. */
export const ScriptToolCall = z
  .object({
    name: z.string().min(1),
    arguments: z.union([z.record(z.string(), z.unknown()), z.string()]).default({}),
  })
  .strict();
export type ScriptToolCall = z.infer<typeof ScriptToolCall>;

/**
 * One scripted model reply. Text and/or tool calls, plus optional faults:
 * - `cut_after_chunks`: close the connection after that many SSE chunks (no `[DONE]`); in a
 *   non-streaming call, close it before answering;
 * - `invalid_tool_json`: emit the tool calls' arguments truncated, so they are not valid JSON;
 * - `delay_ms`: pause between streamed chunks (to watch text arrive before a tool call completes);
 * - `first_delay_ms`: pause before the first streamed chunk, as a model server computing a long prompt;
 * - `error`: answer with this HTTP status and message instead of a completion.
 */
export const ScriptTurn = z
  .object({
    text: z.string().default(""),
    tool_calls: z.array(ScriptToolCall).default([]),
    finish_reason: z.enum(["stop", "length", "tool_calls"]).optional(),
    chunk_chars: z.number().int().min(1).max(10_000).default(8).describe("Characters per streamed delta"),
    cut_after_chunks: z.number().int().min(0).optional(),
    delay_ms: z.number().int().min(0).max(60_000).default(0).describe("Pause between streamed chunks"),
    first_delay_ms: z
      .number()
      .int()
      .min(0)
      .max(60_000)
      .default(0)
      .describe("Pause before the first streamed chunk (a long prompt's prefill)"),
    invalid_tool_json: z.boolean().default(false),
    error: z
      .object({ status: z.number().int().min(400).max(599), message: z.string() })
      .strict()
      .optional(),
  })
  .strict();
export type ScriptTurn = z.infer<typeof ScriptTurn>;

/**
 * A script: the turns, replayed in order and from the start again when they run out. With
 * `select: "conversation"` a request instead gets the turn numbered by how many assistant messages
 * it already carries (the last turn once they run out, or for a request that declares no tools),
 * so concurrent conversations, retries and side requests each get the turn that fits.
 */
export const Script = z.union([
  z.array(ScriptTurn).min(1),
  z
    .object({
      turns: z.array(ScriptTurn).min(1),
      select: z.enum(["sequence", "conversation"]).default("sequence"),
    })
    .strict(),
]);
export type Script = z.infer<typeof Script>;

/** The turns of a script in either accepted shape. */
export function turnsOf(script: unknown): ScriptTurn[] {
  const parsed = Script.parse(script);
  return Array.isArray(parsed) ? parsed : parsed.turns;
}

/** How a script picks the turn for a request. */
export function selectionOf(script: unknown): "sequence" | "conversation" {
  const parsed = Script.parse(script);
  return Array.isArray(parsed) ? "sequence" : parsed.select;
}

/** The arguments string a scripted tool call sends. */
export function argumentsText(call: ScriptToolCall, invalid: boolean): string {
  const text = typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments);
  return invalid ? text.slice(0, Math.max(1, text.length - 2)) : text;
}
