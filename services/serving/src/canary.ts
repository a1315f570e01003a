import type { VllmClient } from "./vllm.ts";

/** A fixed prompt; the canary compares the next-token distributions of base model and adapter after it. */
const PROMPT =
  "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n" +
  "The quick brown fox jumps over the lazy dog. Answer in one word:";

/** How many of the most likely next tokens the canary compares. */
const TOP_K = 10;

/**
 * Proof of serving: an adapter whose logprobs on the canary prompt equal the base model's is not
 * being applied (mismatched module names, a stale cache, the base model sampled by mistake). It
 * compares the top-10 next-token logprobs from one forward pass: as sensitive as scoring every
 * prompt token (a LoRA delta moves the whole distribution) at a fraction of the cost on CPU, where
 * vLLM's prompt logprobs are slow.
 */
export class Canary {
  /** Below this largest |delta logprob| an adapter counts as equal to the base model. */
  static readonly minDelta = 1e-4;
  private base: Promise<Record<string, number>> | undefined;
  private checks = 0;

  constructor(private readonly vllm: VllmClient) {}

  /** Forget the base model's figures (after the model server restarted). */
  forgetBase(): void {
    this.base = undefined;
  }

  private async baseLogprobs(): Promise<Record<string, number>> {
    if (!this.base) {
      this.base = this.vllm
        .baseModel()
        .then((m) => this.vllm.nextTokenLogprobs(m.id, PROMPT, TOP_K))
        .catch((err) => {
          this.base = undefined;
          throw err;
        });
    }
    return this.base;
  }

  /** The largest |logprob difference| between the served adapter and the base model. */
  async deltaFromBase(served: string): Promise<number> {
    const [base, adapted] = await Promise.all([
      this.baseLogprobs(),
      this.vllm.nextTokenLogprobs(served, PROMPT, TOP_K),
    ]);
    return largestDelta(base, adapted);
  }

  /**
   * The same proof on a prompt never asked before (a fresh first line), both models computed now:
   * the model server's prefix cache keeps the prompt's earlier tokens as the adapter's weights left
   * them, so a repeated prompt would show the weights the name had, not the ones it has.
   */
  async liveDeltaFromBase(served: string): Promise<number> {
    const prompt = `# check ${Date.now()}-${++this.checks}\n${PROMPT}`;
    const base = await this.vllm.baseModel();
    const [fromBase, adapted] = await Promise.all([
      this.vllm.nextTokenLogprobs(base.id, prompt, TOP_K),
      this.vllm.nextTokenLogprobs(served, prompt, TOP_K),
    ]);
    return largestDelta(fromBase, adapted);
  }
}

/** The largest |logprob difference| between two top-k lists, each way. */
const largestDelta = (a: Record<string, number>, b: Record<string, number>) =>
  Math.max(oneWay(a, b), oneWay(b, a));

/**
 * The largest |delta| over the tokens of `a`. A token missing from `b`'s top-k has a logprob in `b`
 * at most `b`'s smallest listed one: that bound (at least 10x the threshold, since a changed top-k is
 * never noise) stands in for the unknown difference.
 */
function oneWay(a: Record<string, number>, b: Record<string, number>): number {
  const floor = Math.min(...Object.values(b));
  let delta = 0;
  for (const [token, logprob] of Object.entries(a)) {
    const other = b[token];
    const d =
      other === undefined ? Math.max(logprob - floor, Canary.minDelta * 10) : Math.abs(logprob - other);
    delta = Math.max(delta, d);
  }
  return delta;
}
