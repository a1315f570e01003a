import type { BaseModelInfo, ModelNodes } from "@bridle/contracts";
import { ServiceError } from "@bridle/service-kit";
import { Canary } from "./canary.ts";
import { VllmClient } from "./vllm.ts";

interface Node {
  client: VllmClient;
  canary: Canary;
  up: boolean;
  base: BaseModelInfo | undefined;
  /** The adapter names the node had loaded at the last survey, plus what was loaded since. */
  loaded: Set<string>;
  error: string | null;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
/** A failure to reach a node, as opposed to a node that answered (with a refusal, or a 500). */
const unreachable = (err: unknown) => !(err instanceof ServiceError) || err.code === "unreachable";
const unavailable = (text: string) => new ServiceError(text, 503, "model_server_unavailable", true);

/**
 * The model servers behind serving: one vLLM node or several, all serving the same base model.
 * Every adapter version is loaded on each node that is up and proven there; a node that was away
 * (restarted, unreachable) lacks the serving versions when it is back, and the manager's monitor
 * loads them again. Requests go to a node that has what they name, never to one without it.
 * A node serving another base model than the first is left out, with the reason.
 *
 * With `filesUrl` (serving's own address, as the nodes reach it) a node is told to load an adapter
 * from `<filesUrl>/v1/adapter-files/<hash>`: Bridle's vLLM plugin fetches the files, checks them
 * against the hash and keeps them in the node's own cache, so no node needs serving's disk.
 * Without it, nodes load the version's folder by path (a node on serving's host).
 */
export class ModelPool {
  private readonly nodes: Node[];
  private turn = 0;

  constructor(
    clients: VllmClient[],
    private readonly filesUrl?: string,
  ) {
    if (clients.length === 0) throw new Error("a model pool needs at least one model server");
    this.nodes = clients.map((client) => ({
      client,
      canary: new Canary(client),
      up: false,
      base: undefined,
      loaded: new Set(),
      error: "not surveyed yet",
    }));
  }

  static of(urls: string[], timeoutMs: number, filesUrl?: string): ModelPool {
    return new ModelPool(
      urls.map((url) => new VllmClient(url, timeoutMs)),
      filesUrl,
    );
  }

  get size(): number {
    return this.nodes.length;
  }

  private live(): Node[] {
    return this.nodes.filter((n) => n.up);
  }

  /**
   * Asks every node what it serves. Answers the base model, with the adapters loaded on every node
   * that is up (one that lacks any is what the monitor reloads). Throws a retryable error when no
   * node answers.
   */
  async survey(): Promise<BaseModelInfo> {
    await Promise.all(
      this.nodes.map(async (node) => {
        try {
          const base = await node.client.baseModel();
          // A node back from away may be a new process: its base figures are measured again.
          if (!node.up) node.canary.forgetBase();
          Object.assign(node, {
            up: true,
            base,
            loaded: new Set(base.adapters.map((a) => a.id)),
            error: null,
          });
        } catch (err) {
          Object.assign(node, { up: false, base: undefined, error: message(err) });
        }
      }),
    );
    const first = this.live()[0];
    if (!first?.base) throw this.noneUp();
    for (const node of this.live()) {
      if (node.base!.id !== first.base.id) {
        node.up = false;
        node.error = `serves ${node.base!.id}, while the pool serves ${first.base.id}: left out`;
      }
    }
    const live = this.live();
    return {
      ...first.base,
      adapters: first.base.adapters.filter((a) => live.every((n) => n.loaded.has(a.id))),
    };
  }

  /** The base model's name, as last surveyed (surveyed now if never). */
  async baseModel(): Promise<string> {
    const known = this.live()[0]?.base?.id;
    return known ?? (await this.survey()).id;
  }

  private noneUp(): ServiceError {
    const why = this.nodes.map((n) => `${n.client.baseUrl}: ${n.error ?? "down"}`).join("; ");
    return unavailable(`no model server is reachable (${why})`);
  }

  private away(node: Node, err: unknown): void {
    node.up = false;
    node.error = message(err);
  }

  /**
   * Loads an adapter on every node that is up and lacks it. A node that cannot be reached is marked
   * away (it gets the adapter when it is back); a node that refuses the adapter fails the load.
   */
  async load(served: string, path: string, hash: string): Promise<void> {
    const from = this.filesUrl ? `${this.filesUrl}/v1/adapter-files/${hash}` : path;
    let holders = 0;
    for (const node of this.live()) {
      if (node.loaded.has(served)) {
        holders++;
        continue;
      }
      try {
        await node.client.loadLora(served, from);
        node.loaded.add(served);
        holders++;
      } catch (err) {
        if (!unreachable(err)) throw err;
        this.away(node, err);
      }
    }
    if (holders === 0) throw this.noneUp();
  }

  /** Unloads an adapter from every node that is up; a node away is cleaned when it is back. */
  async unload(served: string): Promise<void> {
    for (const node of this.live()) {
      try {
        await node.client.unloadLora(served);
      } catch (err) {
        if (err instanceof ServiceError && err.status === 404) {
          // not loaded there: nothing to do
        } else if (unreachable(err)) this.away(node, err);
        else throw err;
      }
      node.loaded.delete(served);
    }
  }

  /**
   * Unloads from every node the adapters it still has that `stale` picks (versions retired or
   * failed while the node was away). Adapters serving never loaded are left alone: the model server
   * may be shared. Returns what went, as `url: name`.
   */
  async unloadStale(stale: (served: string) => boolean): Promise<string[]> {
    const gone: string[] = [];
    for (const node of this.live()) {
      for (const name of [...node.loaded].filter(stale)) {
        try {
          await node.client.unloadLora(name);
          gone.push(`${node.client.baseUrl}: ${name}`);
        } catch (err) {
          if (unreachable(err)) {
            this.away(node, err);
            break;
          }
        }
        node.loaded.delete(name);
      }
    }
    return gone;
  }

  /**
   * The canary on every node that holds the adapter: the smallest distance from the base model
   * found, so a node where the adapter is not applied fails the whole version. `live`: on a prompt
   * never asked before, both models computed now.
   */
  async deltaFromBase(served: string, live = false): Promise<number> {
    const holders = this.live().filter((n) => n.loaded.has(served));
    if (holders.length === 0) throw unavailable(`no model server that is up has ${served} loaded`);
    const deltas = await Promise.all(
      holders.map((n) => (live ? n.canary.liveDeltaFromBase(served) : n.canary.deltaFromBase(served))),
    );
    return Math.min(...deltas);
  }

  forgetBase(): void {
    for (const node of this.nodes) node.canary.forgetBase();
  }

  /**
   * A node to send a request for `model` to: the nodes that are up and have it take turns; when
   * none has it (the base model, or a name the model server should refuse), any node that is up.
   */
  client(model: string): VllmClient {
    const live = this.live();
    if (live.length === 0) throw this.noneUp();
    const holders = live.filter((n) => n.loaded.has(model));
    const from = holders.length > 0 ? holders : live;
    this.turn = (this.turn + 1) % from.length;
    return from[this.turn]!.client;
  }

  /** The pool as the guard routes by it: each node, and what it serves of `serving`. */
  view(serving: Set<string>): ModelNodes {
    const base = this.live()[0]?.base?.id ?? null;
    return {
      baseModel: base,
      serving: [...serving],
      nodes: this.nodes.map((n) => ({
        url: n.client.baseUrl,
        state: n.up ? ("up" as const) : ("down" as const),
        models: n.up && n.base ? [n.base.id, ...[...n.loaded].filter((name) => serving.has(name))] : [],
        error: n.error,
      })),
    };
  }
}
