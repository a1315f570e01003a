import type { IncomingMessage } from "node:http";
import { ModelNodes } from "@bridle/contracts";
import { callJson, fnv1a, type Logger, ServiceError } from "@bridle/service-kit";
import { type Cancel, UpstreamClient } from "./upstream.ts";

/** How long serving's map of the pool is trusted before it is read again. */
const NODES_TTL_MS = 2_000;
/** How long a node that could not be reached is tried last. */
const AWAY_MS = 5_000;

/**
 * Which model server answers each call. With serving's URL the guard follows serving's map of its
 * pool (`GET /v1/nodes`): a call goes to a node that is up and has the call's model (an adapter
 * version is loaded on each node in turn, so for a moment only some have it), else to any node
 * that is up (which answers 404 for a name it lacks: never the base model in its place). Without
 * serving, the configured nodes are all equal. One session keeps to one node while it can, so the
 * node's prefix cache holds its growing prompt (rendezvous hashing: a node leaving moves only its
 * own sessions). A node that cannot be reached is skipped for the next one; when none is left the
 * harness gets a retryable 503.
 */
export class ModelRouter {
  private readonly clients = new Map<string, UpstreamClient>();
  private readonly away = new Map<string, number>();
  private map: { at: number; answer: Promise<ModelNodes | undefined> } | undefined;
  private warned = false;

  constructor(
    private readonly urls: string[],
    private readonly timeoutMs: number,
    private readonly log: Logger,
    private readonly servingUrl?: string,
  ) {
    if (urls.length === 0) throw new Error("the guard needs at least one model server");
  }

  private client(url: string): UpstreamClient {
    let client = this.clients.get(url);
    if (!client) {
      client = new UpstreamClient(url, this.timeoutMs);
      this.clients.set(url, client);
    }
    return client;
  }

  /** Serving's map of the pool, read at most every NODES_TTL_MS; undefined when serving cannot say. */
  private nodes(): Promise<ModelNodes | undefined> {
    if (!this.servingUrl) return Promise.resolve(undefined);
    if (!this.map || Date.now() - this.map.at > NODES_TTL_MS) {
      const answer = callJson(`${this.servingUrl}/v1/nodes`, { schema: ModelNodes, timeoutMs: 5_000 }).then(
        (nodes) => {
          this.warned = false;
          return nodes;
        },
        (err: unknown) => {
          if (!this.warned)
            this.log.warn(
              { err },
              "serving's map of model servers is unavailable: routing over the configured ones",
            );
          this.warned = true;
          return undefined;
        },
      );
      this.map = { at: Date.now(), answer };
    }
    return this.map.answer;
  }

  /** The nodes to try for `model`, in order: those that have it first, this session's own first among them. */
  async candidates(model: string, affinity: string): Promise<string[]> {
    const map = await this.nodes();
    let pick: string[];
    const up = map?.nodes.filter((n) => n.state === "up") ?? [];
    // Serving knows no node up (just started, or it lost them all): the configured ones are tried.
    if (map && up.length > 0) {
      const holders = up.filter((n) => n.models.includes(model));
      // A version serving that no node up has yet (its nodes away, or loading it again) is waited
      // for; any other name goes to any node, which answers 404 for one it does not serve.
      pick = (holders.length > 0 || map.serving.includes(model) ? holders : up).map((n) => n.url);
    } else pick = this.urls;
    const now = Date.now();
    const isAway = (url: string) => (this.away.get(url) ?? 0) > now;
    return pick
      .map((url) => ({ url, away: isAway(url), score: fnv1a(`${affinity}|${url}`) }))
      .sort((a, b) => Number(a.away) - Number(b.away) || b.score - a.score)
      .map((n) => n.url);
  }

  /**
   * POSTs to a node for the body's model and resolves once its response headers arrive. A node that
   * cannot be reached (refused, reset, unknown host) is skipped for the next; the model server's own
   * answers (4xx, 5xx) pass on as they are.
   */
  async post(
    path: string,
    body: { model?: unknown },
    cancel: Cancel | undefined,
    affinity: string,
  ): Promise<IncomingMessage> {
    const model = typeof body.model === "string" ? body.model : "";
    const nodes = await this.candidates(model, affinity);
    const tried: string[] = [];
    for (const url of nodes) {
      try {
        return await this.client(url).post(path, body, cancel);
      } catch (err) {
        if (!(err instanceof ServiceError && err.code === "upstream_unavailable") || cancel?.aborted)
          throw err;
        this.away.set(url, Date.now() + AWAY_MS);
        this.map = undefined; // read serving's map afresh: the node may be known down already
        tried.push(err.message);
        this.log.warn({ node: url, model, err: err.message }, "model server unreachable: trying the next");
      }
    }
    throw new ServiceError(
      nodes.length === 0
        ? `no model server that is up has ${model} loaded yet; retry shortly`
        : `no model server for ${model} could be reached (${tried.join("; ")}); retry shortly`,
      503,
      "upstream_unavailable",
      true,
    );
  }

  close(): void {
    for (const client of this.clients.values()) client.close();
  }
}
