import { argumentsText, type ScriptTurn } from "./script.ts";
import { fakeLogprob, renderCompletion, renderPrompt, tokenize } from "./tokens.ts";

/** The parts of a chat completions request the scripted upstream reads. */
export interface ChatRequest {
  model?: string;
  messages?: { role?: unknown; content?: unknown; tool_calls?: unknown }[];
  stream?: boolean;
  logprobs?: boolean;
  return_token_ids?: boolean;
  stream_options?: { include_usage?: boolean };
}

interface Prepared {
  id: string;
  model: string;
  created: number;
  text: string;
  calls: { id: string; name: string; arguments: string }[];
  finish: string;
  promptIds: number[];
  completionIds: number[];
}

let counter = 0;

function prepare(turn: ScriptTurn, req: ChatRequest): Prepared {
  counter++;
  const calls = turn.tool_calls.map((c, i) => ({
    id: `chatcmpl-tool-${counter}-${i}`,
    name: c.name,
    arguments: argumentsText(c, turn.invalid_tool_json),
  }));
  return {
    id: `chatcmpl-scripted-${counter}`,
    model: req.model ?? "scripted-model",
    created: Math.floor(Date.now() / 1000),
    text: turn.text,
    calls,
    finish: turn.finish_reason ?? (calls.length > 0 ? "tool_calls" : "stop"),
    promptIds: req.return_token_ids ? tokenize(renderPrompt(req.messages ?? [])) : [],
    completionIds: req.return_token_ids ? tokenize(renderCompletion(turn.text, calls)) : [],
  };
}

const logprobContent = (ids: number[], from: number) =>
  ids.map((id, i) => ({
    token: `token_id:${id}`,
    logprob: fakeLogprob(from + i),
    bytes: [],
    top_logprobs: [],
  }));

/** A complete (non-streaming) chat completion, in vLLM's shape. */
export function completionBody(turn: ScriptTurn, req: ChatRequest): unknown {
  const p = prepare(turn, req);
  const completionTokens = req.return_token_ids
    ? p.completionIds.length
    : tokenize(renderCompletion(p.text, p.calls)).length;
  return {
    id: p.id,
    object: "chat.completion",
    created: p.created,
    model: p.model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: p.text.length > 0 ? p.text : null,
          tool_calls: p.calls.map((c) => ({
            id: c.id,
            type: "function",
            function: { name: c.name, arguments: c.arguments },
          })),
        },
        logprobs: req.logprobs ? { content: logprobContent(p.completionIds, 0) } : null,
        finish_reason: p.finish,
        ...(req.return_token_ids ? { token_ids: p.completionIds } : {}),
      },
    ],
    usage: {
      prompt_tokens: p.promptIds.length,
      completion_tokens: completionTokens,
      total_tokens: p.promptIds.length + completionTokens,
    },
    ...(req.return_token_ids ? { prompt_token_ids: p.promptIds } : {}),
  };
}

/**
 * The SSE chunks of a streamed completion, in vLLM's shape: role first (with the prompt's token ids),
 * text deltas, tool-call deltas (`{index, id, type, function: {name, arguments: ""}}` then argument
 * pieces), the finish chunk, then usage when asked for.
 */
export function streamChunks(turn: ScriptTurn, req: ChatRequest): string[] {
  const p = prepare(turn, req);
  const size = turn.chunk_chars;
  const chunk = (delta: unknown, extra: Record<string, unknown> = {}, finish: string | null = null) =>
    JSON.stringify({
      id: p.id,
      object: "chat.completion.chunk",
      created: p.created,
      model: p.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish, ...extra }],
    });
  const out: string[] = [];
  const first = JSON.parse(chunk({ role: "assistant", content: "" }));
  if (req.return_token_ids) first.prompt_token_ids = p.promptIds;
  out.push(JSON.stringify(first));
  let used = 0;
  const tokenExtra = (n: number) => {
    const ids = p.completionIds.slice(used, used + n);
    const extra: Record<string, unknown> = {};
    if (req.return_token_ids) extra.token_ids = ids;
    if (req.logprobs) extra.logprobs = { content: logprobContent(ids, used) };
    used += ids.length;
    return extra;
  };
  for (let i = 0; i < p.text.length; i += size) {
    const piece = p.text.slice(i, i + size);
    out.push(chunk({ content: piece }, tokenExtra(Array.from(piece).length)));
  }
  p.calls.forEach((call, index) => {
    out.push(
      chunk({
        tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }],
      }),
    );
    for (let i = 0; i < call.arguments.length; i += size) {
      out.push(
        chunk({ tool_calls: [{ index, function: { arguments: call.arguments.slice(i, i + size) } }] }),
      );
    }
  });
  out.push(chunk({}, tokenExtra(p.completionIds.length - used), p.finish));
  if (req.stream_options?.include_usage) {
    const completionTokens = tokenize(renderCompletion(p.text, p.calls)).length;
    out.push(
      JSON.stringify({
        id: p.id,
        object: "chat.completion.chunk",
        created: p.created,
        model: p.model,
        choices: [],
        usage: {
          prompt_tokens: p.promptIds.length,
          completion_tokens: completionTokens,
          total_tokens: p.promptIds.length + completionTokens,
        },
      }),
    );
  }
  return out;
}
