/**
 * The test stack's settings: its own data folder and ports, so it never collides with a stack a
 * developer runs on the defaults. The install (venv, model) is shared with ./bridle.
 */
import { tmpdir } from "node:os";
import { join } from "node:path";

export const testStackEnv: Record<string, string> = {
  BRIDLE_DATA: process.env.BRIDLE_TEST_DATA ?? join(tmpdir(), "bridle-e2e"),
  // The smallest model: these tests check structure, not skill (learning-real.test.ts runs the real one).
  BRIDLE_MODEL: "smollm2-135m",
  BRIDLE_PORT_BASE: "28700",
  BRIDLE_TEMPORAL_PORT: "27233",
  BRIDLE_TEMPORAL_UI_PORT: "28233",
  BRIDLE_VLLM_PORT: "28000",
  // Short generations keep rollouts on the CPU model quick; the tests check structure, not skill.
  BRIDLE_MAX_TOKENS: "128",
  // Short sessions on the 135M fit in far less than the default 2 GiB of KV cache, and the
  // real-model test's second stack shares the machine's memory with this one.
  BRIDLE_VLLM_KV_GIB: "1",
  LOG_LEVEL: "info",
};

/**
 * A stack of the long commands' own (soak, benchmarks): its data in `bridle-<name>` in the system's
 * temporary folder, its ports in the `<k>000`s (gateway and services from <k>700, Temporal on
 * <k>233 and its UI on <k>234, vLLM on <k>000), clear of the tests' stacks.
 */
export function separateStackEnv(name: string, k: number): Record<string, string> {
  return {
    ...testStackEnv,
    BRIDLE_DATA: join(tmpdir(), `bridle-${name}`),
    BRIDLE_PORT_BASE: `${k}700`,
    BRIDLE_TEMPORAL_PORT: `${k}233`,
    BRIDLE_TEMPORAL_UI_PORT: `${k}234`,
    BRIDLE_VLLM_PORT: `${k}000`,
  };
}
