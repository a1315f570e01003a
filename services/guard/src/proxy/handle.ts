import type { Session } from "@bridle/contracts";
import { type Logger, ServiceError } from "@bridle/service-kit";
import { toOpenAIRequest } from "./anthropic-request.ts";
import { AnthropicCollector, AnthropicStreamWriter } from "./anthropic-response.ts";
import { type ExchangeDeps, openExchange, type Sink } from "./exchange.ts";
import { type Api, errorOutcome, type HeaderGetter, parseJsonBody, sessionOf } from "./http.ts";
import { OpenAICollector, OpenAIStreamWriter } from "./openai.ts";
import { Cancel } from "./upstream.ts";

/** The model server's own refusals (4xx), logged like its outages; the guard's own 4xx are not. */
const UPSTREAM_CODES = new Set(["model_not_found", "upstream_rejected"]);

export interface ProxyDeps extends ExchangeDeps {
  /** Clamp for `max_tokens` (harnesses ask for more than small served models allow). */
  maxTokensCap?: number | undefined;
}

/** What to answer: a JSON body, or an event stream to run. Independent of the HTTP framework. */
export type ProxyOutcome =
  | { status: number; headers: Record<string, string>; json: unknown }
  | { stream: (write: (text: string) => void) => Promise<void>; abort: Cancel };

/** Fields of an OpenAI request that the guard decides, not the harness. */
const GUARD_FIELDS = ["model", "stream", "stream_options"];

/**
 * One harness call to `POST /v1/chat/completions` or `POST /v1/messages`: authenticate the session,
 * translate (Anthropic), open the exchange upstream, and say how to answer. Never throws: failures
 * become the API's own error shape.
 */
export async function handleProxyCall(
  deps: ProxyDeps,
  log: Logger,
  api: Api,
  header: HeaderGetter,
  text: string,
): Promise<ProxyOutcome> {
  let release = () => {};
  try {
    const session = await sessionOf(header, deps.store);
    // Counted before the check, so ending the session either refuses this call or waits for it.
    release = deps.store.inFlight.begin(session.id);
    if (session.endedAt)
      throw new ServiceError(
        `Guard session ${session.id} has ended (its rollout is over): no more model calls`,
        409,
        "session_ended",
        false,
      );
    const body = parseJsonBody(text);
    const request = api === "openai" ? openAIRequest(body) : toOpenAIRequest(body);
    if (deps.maxTokensCap) capMaxTokens(request, deps.maxTokensCap);
    enforceSampling(request, session);
    const stream = body.stream === true;
    const abort = new Cancel();
    // Only calls the model answered count: a harness retrying while the model server restarts
    // must not spend the budget on refusals and end the rollout with nothing the model wrote.
    const spent =
      session.maxCalls !== undefined &&
      (await deps.store.counts(session.id)).calls >= session.maxCalls &&
      (await deps.store.records(session.id)).filter((r) => r.error === null).length >= session.maxCalls;
    if (spent)
      log.info(
        { session: session.id, maxCalls: session.maxCalls },
        "call budget spent: closing the session's loop",
      );
    const answer = spent
      ? closingAnswer(session)
      : await openExchange({ ...deps, log }, session, api, request, stream, abort);
    if (stream) {
      const includeUsage =
        (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
      const streamed = release;
      release = () => {};
      return {
        abort,
        stream: (write) =>
          answer(
            api === "openai"
              ? new OpenAIStreamWriter(write, session.adapter, includeUsage)
              : new AnthropicStreamWriter(write, session.adapter),
          ).finally(streamed),
      };
    }
    const sink = api === "openai" ? new OpenAICollector() : new AnthropicCollector();
    await answer(sink);
    release();
    if (sink.failure) throw new ServiceError(sink.failure, 502, "upstream_error", true);
    return { status: 200, headers: {}, json: sink.body() };
  } catch (err) {
    release();
    if (err instanceof ServiceError) {
      if (err.status >= 500 || UPSTREAM_CODES.has(err.code))
        log.warn({ status: err.status, code: err.code, message: err.message }, "upstream failure");
    } else log.error({ err, api }, "proxy failure");
    return errorOutcome(api, err);
  }
}

/** What a session whose call budget is spent hears instead of the model. */
export const BUDGET_NOTICE =
  "[bridle guard] This session's model-call budget is spent. No more tool calls can run: the task ends here.";

/**
 * The answer to a call past the session's budget, made by the guard: a closing text and no tool
 * call, so every harness ends its loop the way it does when the model stops. Nothing goes upstream
 * and nothing is recorded, so the trajectory holds only what the model wrote.
 */
function closingAnswer(session: Session): (sink: Sink) => Promise<void> {
  return async (sink) => {
    sink.text(BUDGET_NOTICE);
    sink.finish("stop", { promptTokens: 0, completionTokens: 0 }, session.adapter);
  };
}

function openAIRequest(body: Record<string, unknown>): Record<string, unknown> {
  if (!Array.isArray(body.messages)) {
    throw new ServiceError("`messages` must be an array of chat messages", 400, "invalid_request", false);
  }
  if (typeof body.n === "number" && body.n > 1) {
    throw new ServiceError(
      "`n` must be 1: the guard checks and captures one choice per call",
      400,
      "invalid_request",
      false,
    );
  }
  const out = { ...body };
  for (const field of GUARD_FIELDS) delete out[field];
  return out;
}

/**
 * A training or evaluation session samples exactly as the run says, whatever the harness would
 * choose: its temperature, and otherwise plain sampling (top_p 1, no top-k, min-p or penalties, so
 * neither a harness's nor the model's generation defaults leak in and the sampling logprobs are
 * the policy's own). A session seed gives each call a seed of its own, derived from the seed and
 * the conversation's length, so a rerun of the same conversation samples the same tokens.
 */
export function enforceSampling(request: Record<string, unknown>, session: Session): void {
  if (session.temperature === undefined) return;
  request.temperature = session.temperature;
  request.top_p = 1;
  request.top_k = 0;
  request.min_p = 0;
  request.repetition_penalty = 1;
  request.presence_penalty = 0;
  request.frequency_penalty = 0;
  if (session.seed !== undefined) {
    const turns = Array.isArray(request.messages) ? request.messages.length : 0;
    request.seed = (Math.imul(session.seed ^ 0x9e3779b9, 31) + turns * 0x85ebca6b) >>> 1;
  } else delete request.seed;
}

function capMaxTokens(request: Record<string, unknown>, cap: number): void {
  for (const key of ["max_tokens", "max_completion_tokens"]) {
    if (typeof request[key] === "number" && (request[key] as number) > cap) request[key] = cap;
  }
}
