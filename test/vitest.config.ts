import { defineConfig } from "vitest/config";

// End-to-end files start real stacks (vLLM, services, the trainer worker): one at a time.
export default defineConfig({
  test: { fileParallelism: false, testTimeout: 300_000, hookTimeout: 400_000 },
});
