import { defineConfig } from "vitest/config";

// The vLLM-backed file starts a real model server; one file at a time keeps a 2-core machine usable.
export default defineConfig({
  test: { fileParallelism: false, testTimeout: 240_000, hookTimeout: 360_000 },
});
