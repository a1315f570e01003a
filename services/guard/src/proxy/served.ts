import { AdapterList, BaseModelInfo, type ServedIdentity } from "@bridle/contracts";
import { callJson, type Logger } from "@bridle/service-kit";

/** How long serving's list of adapters is trusted for a name that can move (a bare adapter name). */
const LIST_TTL_MS = 2_000;

/**
 * Which adapter version (and weight digest) serves a model name, read from serving's registry: the
 * proof on each captured call of what answered it, which the model server's own echo of the name
 * cannot give. A versioned name (`<adapter>@v<N>`) always means the same weights, so its identity is
 * kept once read; a bare adapter name follows its current version; the base model has no adapter.
 */
export class ServedModels {
  private readonly fixed = new Map<string, ServedIdentity>();
  private list: { at: number; answer: Promise<AdapterList> } | undefined;
  private base: Promise<string> | undefined;
  private warned = false;

  constructor(
    private readonly servingUrl: string,
    private readonly log: Logger,
  ) {}

  /** The identity of `model`, or null when serving does not know it or cannot be reached. */
  async resolve(model: string): Promise<ServedIdentity | null> {
    const known = this.fixed.get(model);
    if (known) return known;
    try {
      const { adapters } = await this.adapters();
      for (const adapter of adapters) {
        const version = adapter.versions.find((v) => v.servedName === model && v.state === "serving");
        if (version) {
          const identity = { model, adapter: adapter.name, version: version.version, hash: version.hash };
          this.fixed.set(model, identity);
          return identity;
        }
        if (adapter.name === model && adapter.current !== null) {
          const current = adapter.versions.find((v) => v.version === adapter.current)!;
          return { model, adapter: adapter.name, version: current.version, hash: current.hash };
        }
      }
      if ((await this.baseModel()) === model) {
        const identity = { model, adapter: null, version: null, hash: null };
        this.fixed.set(model, identity);
        return identity;
      }
      return null;
    } catch (err) {
      this.list = undefined;
      this.base = undefined;
      if (!this.warned)
        this.log.warn(
          { err },
          "serving's registry is unavailable: calls are captured without proof of what served them",
        );
      this.warned = true;
      return null;
    }
  }

  private adapters() {
    if (!this.list || Date.now() - this.list.at > LIST_TTL_MS) {
      const answer = callJson(`${this.servingUrl}/v1/adapters`, { schema: AdapterList, timeoutMs: 5_000 });
      this.list = { at: Date.now(), answer };
    }
    return this.list.answer;
  }

  private baseModel() {
    this.base ??= callJson(`${this.servingUrl}/v1/base-model`, {
      schema: BaseModelInfo,
      timeoutMs: 5_000,
    }).then((info) => info.id);
    return this.base;
  }
}
