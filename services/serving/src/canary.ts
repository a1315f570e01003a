import type { VllmClient } from "./vllm.ts";

/** A fixed prompt whose every token the canary scores, under the base model and under an adapter. */
const PROMPT =
  "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n" +
  "The quick brown fox jumps over the lazy dog. Answer in one word:";

/**
 * Proof of serving: an adapter whose logprobs on the canary prompt equal the base model's is not
 * being applied (mismatched module names, a stale cache, the base model sampled by mistake).
 */
export class Canary {
  /** Below this largest |delta logprob| an adapter counts as equal to the base model. */
  static readonly minDelta = 1e-4;
  private base: Promise<number[]> | undefined;

  constructor(private readonly vllm: VllmClient) {}

  /** Forget the base model's figures (after the model server restarted). */
  forgetBase(): void {
    this.base = undefined;
  }

  private async baseLogprobs(): Promise<number[]> {
    if (!this.base) {
      this.base = this.vllm
        .baseModel()
        .then((m) => this.vllm.promptLogprobs(m.id, PROMPT))
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
      this.vllm.promptLogprobs(served, PROMPT),
    ]);
    if (base.length !== adapted.length) return Number.POSITIVE_INFINITY;
    return Math.max(...base.map((b, i) => Math.abs(b - adapted[i]!)));
  }
}
