import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type ChatRequest, completionBody, streamChunks } from "./responses.ts";
import { type ScriptTurn, selectionOf, turnsOf } from "./script.ts";

/** A running scripted upstream. */
export interface ScriptedUpstream {
  url: string;
  port: number;
  /** Every chat request body received, in order (what a test asserts the proxy sent upstream). */
  requests: ChatRequest[];
  /** Replaces the script and starts again from its first turn. */
  setScript(script: unknown): void;
  close(): Promise<void>;
}

export interface UpstreamOptions {
  script: unknown;
  port?: number;
  host?: string;
  /** Served model names listed by `/v1/models`. */
  models?: string[];
  /** Keep request bodies for `requests` (off in benchmarks, where they would pile up). */
  record?: boolean;
}

/**
 * TEST DOUBLE for the model server (vLLM): an OpenAI-compatible server that replays a fixed script
 * of replies instead of running a model, so proxy tests and benchmarks are deterministic. It speaks
 * vLLM's dialect: streamed `delta.tool_calls`, `prompt_token_ids`/`token_ids` when asked with
 * `return_token_ids`, and `logprobs.content` when asked with `logprobs`. Never on a product path.
 *
 * Admin routes for tests: `GET /_scripted/requests`, `PUT /_scripted/script` (body: a script).
 */
export function startScriptedUpstream(options: UpstreamOptions): Promise<ScriptedUpstream> {
  let turns: ScriptTurn[] = turnsOf(options.script);
  let selection = selectionOf(options.script);
  let next = 0;
  const requests: ChatRequest[] = [];
  const models = options.models ?? ["scripted-model"];
  const record = options.record ?? true;

  const nextTurn = (chat: ChatRequest) => {
    if (selection === "conversation") {
      // Side requests that declare no tools (titles, summaries) get the closing turn.
      if (!(chat as { tools?: unknown[] }).tools?.length) return turns.at(-1)!;
      const messages = (chat as { messages?: { role?: string }[] }).messages ?? [];
      const answered = messages.filter((m) => m.role === "assistant").length;
      return turns[Math.min(answered, turns.length - 1)]!;
    }
    const turn = turns[next % turns.length]!;
    next++;
    return turn;
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) json(res, 500, { error: { message: String(err), type: "internal_error" } });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method === "GET" && (path === "/health" || path === "/healthz"))
      return json(res, 200, { ok: true });
    if (req.method === "GET" && path === "/v1/models") {
      return json(res, 200, {
        object: "list",
        data: models.map((id) => ({
          id,
          object: "model",
          created: 0,
          owned_by: "scripted",
          root: id,
          parent: null,
        })),
      });
    }
    if (req.method === "GET" && path === "/_scripted/requests") return json(res, 200, requests);
    const body = await readBody(req);
    if (req.method === "PUT" && path === "/_scripted/script") {
      try {
        const script: unknown = JSON.parse(body);
        turns = turnsOf(script);
        selection = selectionOf(script);
        next = 0;
        requests.length = 0;
        return json(res, 200, { turns: turns.length });
      } catch (err) {
        return json(res, 400, { error: { message: String(err), type: "invalid_request_error" } });
      }
    }
    if (req.method !== "POST" || path !== "/v1/chat/completions") {
      return json(res, 404, { error: { message: `No route ${req.method} ${path}`, type: "not_found" } });
    }
    let chat: ChatRequest;
    try {
      chat = JSON.parse(body) as ChatRequest;
    } catch {
      return json(res, 400, { error: { message: "body is not JSON", type: "invalid_request_error" } });
    }
    if (record) requests.push(chat);
    const turn = nextTurn(chat);
    if (turn.error)
      return json(res, turn.error.status, { error: { message: turn.error.message, type: "scripted_error" } });
    if (!chat.stream) {
      if (turn.cut_after_chunks !== undefined) return void res.socket?.destroy();
      return json(res, 200, completionBody(turn, chat));
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const chunks = streamChunks(turn, chat);
    if (turn.first_delay_ms > 0) {
      res.flushHeaders(); // as vLLM does: the headers at once, the first event once the prompt is computed
      await new Promise((r) => setTimeout(r, turn.first_delay_ms));
    }
    if (turn.delay_ms > 0) return streamSlowly(res, chunks, turn.delay_ms, turn.cut_after_chunks);
    const cut = turn.cut_after_chunks;
    let payload = "";
    for (let i = 0; i < chunks.length; i++) {
      if (cut !== undefined && i >= cut) {
        // Flush what was promised, then drop the connection mid-stream, as a crashed server would.
        res.write(payload);
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      payload += `data: ${chunks[i]}\n\n`;
    }
    res.end(`${payload}data: [DONE]\n\n`);
  }

  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port;
      resolve({
        url: `http://${options.host ?? "127.0.0.1"}:${port}`,
        port,
        requests,
        setScript: (script) => {
          turns = turnsOf(script);
          selection = selectionOf(script);
          next = 0;
        },
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

async function streamSlowly(
  res: ServerResponse,
  chunks: string[],
  delayMs: number,
  cut?: number,
): Promise<void> {
  for (let i = 0; i < chunks.length; i++) {
    if (cut !== undefined && i >= cut) return void res.socket?.destroy();
    res.write(`data: ${chunks[i]}\n\n`);
    await new Promise((r) => setTimeout(r, delayMs));
  }
  res.end("data: [DONE]\n\n");
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}
