import { defineConfig } from "vitest/config";
import { testStackEnv } from "./src/stack-env.ts";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts"],
    // One real stack per run, shared by every end-to-end file.
    globalSetup: ["./src/global-setup.ts"],
    env: testStackEnv,
    pool: "forks",
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 600_000,
  },
});
