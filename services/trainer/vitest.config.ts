import { defineConfig } from "vitest/config";

// Each test file starts its own trainer worker (a real Python process holding the model); running
// them one at a time keeps a 2-core machine usable.
export default defineConfig({
  test: { fileParallelism: false, testTimeout: 240_000, hookTimeout: 180_000 },
});
