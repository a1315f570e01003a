import { Agent, type IncomingMessage, type RequestOptions, request } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { urlToHttpOptions } from "node:url";
import { ServiceError } from "@bridle/service-kit";
import { createParser } from "eventsource-parser";

/**
 * Cancels one upstream call (the harness hung up). A hook instead of an AbortSignal: handing a
 * signal to `http.request` costs listeners and abort machinery on every call, several percent of
 * the guard's CPU per answer, for an event that rarely happens.
 */
export class Cancel {
  aborted = false;
  private hook: (() => void) | undefined;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const hook = this.hook;
    this.hook = undefined;
    hook?.();
  }

  /** Runs `hook` on abort (at once when already aborted); the returned function unhooks it. */
  onAbort(hook: () => void): () => void {
    if (this.aborted) hook();
    else this.hook = hook;
    return () => {
      if (this.hook === hook) this.hook = undefined;
    };
  }
}

/**
 * The guard's client for the OpenAI-compatible model server. Plain `node:http` with keep-alive:
 * the proxy's overhead budget is a few milliseconds, and pooled sockets matter at 256 streams.
 */
export class UpstreamClient {
  private readonly agent: Agent;
  private readonly url: URL;
  private readonly targets = new Map<string, RequestOptions>();

  constructor(
    baseUrl: string,
    private readonly timeoutMs: number,
  ) {
    this.url = new URL(baseUrl);
    const options = { keepAlive: true, maxSockets: 1024, maxFreeSockets: 256 };
    this.agent = this.url.protocol === "https:" ? new HttpsAgent(options) : new Agent(options);
  }

  /** POSTs JSON and resolves once response headers arrive. A non-2xx answer becomes a ServiceError with the status the harness should see. */
  post(path: string, body: unknown, cancel?: Cancel): Promise<IncomingMessage> {
    const payload = JSON.stringify(body);
    const send = this.url.protocol === "https:" ? httpsRequest : request;
    let target = this.targets.get(path);
    if (!target) {
      // What http.request would derive from a URL on every call, worked out once per path.
      target = urlToHttpOptions(new URL(path, this.url));
      this.targets.set(path, target);
    }
    return new Promise((resolve, reject) => {
      const req = send(
        {
          ...target,
          method: "POST",
          agent: this.agent,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
          timeout: this.timeoutMs,
        },
        (res) => {
          const status = res.statusCode ?? 502;
          if (status < 400) return resolve(res);
          readAll(res).then(
            (text) => reject(upstreamStatusError(status, text)),
            () => reject(new ServiceError(`model server answered ${status}`, 502, "upstream_error", true)),
          );
        },
      );
      req.on("timeout", () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      if (cancel) {
        // Unhooked once the exchange is over, so a late abort cannot touch a pooled socket.
        const unhook = cancel.onAbort(() => req.destroy(new Error("the harness closed the connection")));
        req.on("close", unhook);
      }
      req.on("error", (err: NodeJS.ErrnoException) => {
        const down = ["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ECONNRESET"].includes(err.code ?? "");
        reject(
          new ServiceError(
            `model server ${down ? "unreachable" : "failed"} at ${this.url.origin}: ${err.message}`,
            down ? 503 : 502,
            down ? "upstream_unavailable" : "upstream_error",
            true,
          ),
        );
      });
      req.end(payload);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Upstream 5xx is the guard's 502 (retryable); 4xx passes through with the model server's message. */
function upstreamStatusError(status: number, text: string): ServiceError {
  let message = text.slice(0, 1000);
  try {
    const parsed = JSON.parse(text) as { error?: { message?: string } | string; message?: string };
    message =
      (typeof parsed.error === "string" ? parsed.error : parsed.error?.message) ?? parsed.message ?? message;
  } catch {
    // Not JSON: keep the text as it came.
  }
  if (status >= 500)
    return new ServiceError(`model server error ${status}: ${message}`, 502, "upstream_error", true);
  return new ServiceError(message, status, status === 404 ? "model_not_found" : "upstream_rejected", false);
}

export function readAll(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    res.on("data", (c: Buffer) => parts.push(c));
    res.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    res.on("error", reject);
    res.on("aborted", () => reject(new Error("the model server closed the connection mid-answer")));
  });
}

/** How long a stream may be silent: before its first event, and between events after it. */
export interface StreamDeadlines {
  /** The model server computes the whole prompt before it sends anything: minutes on a CPU. */
  firstEventMs: number;
  idleMs: number;
}

/** The most an event may hold before the stream counts as broken (characters, not yet split). */
export const MAX_EVENT_CHARS = 16 * 1024 * 1024;

/**
 * Reads an SSE body and calls `onData` with each event's data. Resolves when `[DONE]` arrives;
 * rejects when the connection ends without it (a cut stream), when no event comes within
 * `firstEventMs`, when nothing arrives for `idleMs` after one did, or when one event grows past
 * `maxEventChars`. Events are split by `eventsource-parser` (the SSE specification's line endings,
 * multi-line data, comments), measured against a hand-written splitter by `pnpm bench:sse`.
 * One idle timer per stream, re-armed with `refresh()`.
 */
export function readSse(
  res: IncomingMessage,
  deadlines: StreamDeadlines,
  onData: (data: string) => void,
  maxEventChars = MAX_EVENT_CHARS,
): Promise<void> {
  return new Promise((resolve, reject) => {
    let done = false;
    let started = false;
    let timer = setTimeout(stall, deadlines.firstEventMs);
    function stall() {
      finish(
        new Error(
          started
            ? `the model server sent nothing for ${deadlines.idleMs} ms`
            : `the model server sent no first event within ${deadlines.firstEventMs} ms (its prompt not yet computed)`,
        ),
      );
      res.destroy();
    }
    function finish(err?: Error) {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve();
    }
    const parser = createParser({
      maxBufferSize: maxEventChars,
      onEvent: (event) => {
        if (done) return;
        const data = event.data.trim();
        if (data === "[DONE]") return finish();
        try {
          onData(data);
        } catch (err) {
          finish(err as Error);
        }
      },
      // Unknown fields and bad `retry` values are ignored, as the specification says.
      onError: (err) => {
        if (err.type !== "max-buffer-size-exceeded") return;
        finish(new Error(`the model server sent an event of more than ${maxEventChars} characters`));
        res.destroy();
      },
    });
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      if (done) return;
      if (started) timer.refresh();
      else {
        started = true;
        clearTimeout(timer);
        timer = setTimeout(stall, deadlines.idleMs);
      }
      parser.feed(chunk);
    });
    res.on("end", () => finish(new Error("the model server ended the stream before it was complete")));
    res.on("aborted", () => finish(new Error("the model server cut the stream mid-answer")));
    res.on("error", (err) => finish(new Error(`the model server stream failed: ${err.message}`)));
    res.on("close", () => finish(new Error("the model server cut the stream mid-answer")));
  });
}
