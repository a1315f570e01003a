import { defineConfig } from "vitest/config";
import { testStackEnv } from "./src/stack-env.ts";

export default defineConfig({
  test: {
    // real/: the embedded 0.5B on a second stack of its own: pi learning, then one rollout of each
    // other harness (about 20 minutes on 2 fp32 cores).
    include: ["src/**/*.test.ts", "real/**/*.test.ts"],
    // One real stack per run, shared by every end-to-end file.
    globalSetup: ["./src/global-setup.ts"],
    env: testStackEnv,
    pool: "forks",
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 600_000,
  },
});
