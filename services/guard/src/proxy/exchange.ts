import type { IncomingMessage } from "node:http";
import type { CapturedToolCall, CaptureRecord, Session } from "@bridle/contracts";
import type { Logger } from "@bridle/service-kit";
import type { GuardStore } from "../capture.ts";
import { contextFor, type EffectsCache, judgeCall, type RawToolCall } from "./judge.ts";
import type { ModelRouter } from "./router.ts";
import type { ServedModels } from "./served.ts";
import { type Cancel, readAll, readSse, type StreamDeadlines } from "./upstream.ts";

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

/** Where an exchange sends what the harness receives; each API renders these its own way. */
export interface Sink {
  text(delta: string): void;
  /** A released tool call; `index` counts released calls only. */
  toolCall(call: RawToolCall, index: number): void;
  finish(reason: string | null, usage: Usage | null, model: string): void;
  /** The upstream failed after the answer began: end the client's stream with an error. */
  fail(message: string): void;
}

export interface ExchangeDeps {
  upstream: ModelRouter;
  /** Sessions and captures: each call's record is appended here. */
  store: GuardStore;
  log: Logger;
  deadlines: StreamDeadlines;
  /** Serving's registry, to name what served each call; without it calls carry no such proof. */
  served?: ServedModels | undefined;
  /** What recent tool calls do, kept across exchanges; without it every call is parsed anew. */
  effects?: EffectsCache | undefined;
}

interface Chunk {
  model?: string;
  prompt_token_ids?: number[] | null;
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  choices?: {
    delta?: { content?: string | null; tool_calls?: DeltaCall[] | null };
    message?: {
      content?: string | null;
      tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[] | null;
    };
    finish_reason?: string | null;
    token_ids?: number[] | null;
    logprobs?: { content?: { logprob: number }[] | null } | null;
  }[];
}
interface DeltaCall {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

/**
 * One model call through the guard: sends the OpenAI-form request upstream (model replaced by the
 * session's adapter; token ids and logprobs asked for when capturing), passes text on at once,
 * holds each tool call until it is complete, judges it, then releases it or puts the rule's notice
 * in its place. Writes the capture record when the call ends, however it ends.
 */
export async function openExchange(
  deps: ExchangeDeps,
  session: Session,
  api: "openai" | "anthropic",
  clientRequest: Record<string, unknown>,
  stream: boolean,
  cancel: Cancel,
): Promise<(sink: Sink) => Promise<void>> {
  const startedAt = new Date();
  const body: Record<string, unknown> = { ...clientRequest, model: session.adapter, stream };
  if (session.capture) Object.assign(body, { logprobs: true, return_token_ids: true });
  if (stream) body.stream_options = { include_usage: true };
  const context = contextFor(session, body);
  // Read beside the model call, not in its way: a registry that is slow to answer delays no token.
  const servedBy = deps.served ? deps.served.resolve(session.adapter) : Promise.resolve(null);
  // What every capture record of this call says, however the call ends.
  const recordOf = () => ({
    seq: 0,
    sessionId: session.id,
    api,
    stream,
    startedAt: startedAt.toISOString(),
    durationMs: Date.now() - startedAt.getTime(),
    adapter: session.adapter,
    // Kept without capture too: the messages are how an evaluation's calls are stitched (and its
    // tool calls counted) when there are no token ids.
    request: body,
  });
  let res: IncomingMessage;
  try {
    res = await deps.upstream.post("/v1/chat/completions", body, cancel, session.id);
  } catch (err) {
    // The harness gets a (retryable) error; the session still shows the call that never got an
    // answer, so a trajectory with a gap says why.
    append(deps, {
      ...recordOf(),
      servedModel: null,
      servedBy: await servedBy,
      response: null,
      toolCalls: [],
      notices: [],
      usage: null,
      promptTokenIds: null,
      completionTokenIds: null,
      logprobs: null,
      error: err instanceof Error ? err.message : String(err),
    });
    throw err;
  }

  return async (sink) => {
    const state = new ExchangeState(session, context, sink, deps.effects);
    let error: string | null = null;
    try {
      if (stream) await readSse(res, deps.deadlines, (data) => state.chunk(JSON.parse(data) as Chunk));
      else state.chunk(JSON.parse(await readAll(res)) as Chunk, true);
      state.end();
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
      if (!cancel.aborted) state.failed(error);
    }
    const record: CaptureRecord = {
      ...recordOf(),
      servedModel: state.model ?? null,
      servedBy: await servedBy,
      response:
        error && state.content === "" ? null : { content: state.content, finishReason: state.finishReason },
      toolCalls: state.judged,
      notices: state.judged.flatMap((c) => (c.notice && !c.released ? [c.notice] : [])),
      usage: state.usage,
      promptTokenIds: session.capture ? state.promptIds : null,
      completionTokenIds: session.capture ? state.completionIds : null,
      logprobs: session.capture ? state.logprobs : null,
      error: cancel.aborted ? "the harness closed the connection" : error,
    };
    append(deps, record);
    const blocked = state.judged.filter((c) => c.decision !== "allow");
    if (blocked.length > 0) {
      deps.log.warn(
        {
          sessionId: session.id,
          calls: blocked.map((c) => ({ name: c.name, rule: c.rule, released: c.released })),
        },
        "tool calls blocked",
      );
    }
  };
}

/** Queued now (a later read of the session waits for it), written without holding up the harness. */
function append(deps: ExchangeDeps, record: CaptureRecord): void {
  void deps.store
    .append(record)
    .catch((err: unknown) => deps.log.error({ err, sessionId: record.sessionId }, "capture write failed"));
}

/** What one exchange has seen so far, and the holding of tool calls until they are complete. */
class ExchangeState {
  content = "";
  finishReason: string | null = null;
  usage: Usage | null = null;
  model: string | undefined;
  promptIds: number[] | null = null;
  completionIds: number[] | null = null;
  logprobs: number[] | null = null;
  judged: CapturedToolCall[] = [];
  private pending = new Map<number, RawToolCall>();
  private released = 0;
  private ended = false;

  constructor(
    private readonly session: Session,
    private readonly context: ReturnType<typeof contextFor>,
    private readonly sink: Sink,
    private readonly effects: EffectsCache | undefined,
  ) {}

  chunk(chunk: Chunk, complete = false): void {
    if (chunk.model) this.model = chunk.model;
    if (chunk.prompt_token_ids) this.promptIds = chunk.prompt_token_ids;
    if (chunk.usage)
      this.usage = {
        promptTokens: chunk.usage.prompt_tokens ?? 0,
        completionTokens: chunk.usage.completion_tokens ?? 0,
      };
    for (const choice of chunk.choices ?? []) {
      // Appended in place: copying the arrays per chunk would be quadratic over a long answer.
      if (choice.token_ids) {
        this.completionIds ??= [];
        for (const id of choice.token_ids) this.completionIds.push(id);
      }
      if (choice.logprobs?.content) {
        this.logprobs ??= [];
        for (const l of choice.logprobs.content) this.logprobs.push(l.logprob);
      }
      const delta = complete ? choice.message : choice.delta;
      if (delta?.content) this.text(delta.content);
      const calls = (delta?.tool_calls ?? []) as DeltaCall[];
      for (let i = 0; i < calls.length; i++) {
        const call = calls[i]!;
        this.toolDelta(call, complete ? i : (call.index ?? i));
      }
      if (complete) this.flushCalls(Number.POSITIVE_INFINITY);
      if (choice.finish_reason) this.finishReason = choice.finish_reason;
    }
  }

  private text(delta: string): void {
    this.content += delta;
    this.sink.text(delta);
  }

  private toolDelta(call: DeltaCall, index: number): void {
    // A new index means every earlier call is complete: judge and release them before going on.
    this.flushCalls(index);
    const held = this.pending.get(index) ?? { id: "", name: "", arguments: "" };
    if (call.id) held.id = call.id;
    if (call.function?.name) held.name += call.function.name;
    if (call.function?.arguments) held.arguments += call.function.arguments;
    this.pending.set(index, held);
  }

  private flushCalls(below: number): void {
    // Most deltas continue the call being held: nothing to release, so no sorted copy to make.
    if (this.pending.size === 0 || (this.pending.size === 1 && this.pending.has(below))) return;
    for (const [index, call] of [...this.pending].sort((a, b) => a[0] - b[0])) {
      if (index >= below) break;
      this.pending.delete(index);
      const verdict = judgeCall(
        this.session,
        this.context,
        { ...call, id: call.id || `call_${index}` },
        this.effects,
      );
      this.judged.push(verdict);
      if (verdict.released) this.sink.toolCall(verdict, this.released++);
      else this.text(`${this.content.length > 0 ? "\n\n" : ""}${verdict.notice}`);
    }
  }

  end(): void {
    this.flushCalls(Number.POSITIVE_INFINITY);
    this.ended = true;
    // With every call withheld the harness must not wait for tool results.
    const reason = this.finishReason === "tool_calls" && this.released === 0 ? "stop" : this.finishReason;
    this.finishReason = reason;
    this.sink.finish(reason, this.usage, this.model ?? this.session.adapter);
  }

  failed(message: string): void {
    if (this.ended) return;
    // Calls cut off mid-way are judged and recorded, but never released: they may be incomplete.
    for (const [index, call] of this.pending) {
      this.judged.push({
        ...judgeCall(this.session, this.context, { ...call, id: call.id || `call_${index}` }, this.effects),
        released: false,
      });
    }
    this.pending.clear();
    this.sink.fail(`upstream model server failed mid-answer: ${message}`);
  }
}
