import { defineConfig } from "vitest/config";
import { testStackEnv } from "./src/stack-env.ts";

/**
 * `pnpm --filter @bridle/e2e test:real`: the embedded 0.5B learning from real rollouts on a second
 * stack of its own. About half an hour on 2 CPU cores (two GRPO steps over 0.5B trajectories), so
 * it is a command of its own, not part of `./bridle test`, until the trainer shares prompt prefixes.
 */
export default defineConfig({
  test: {
    include: ["real/**/*.test.ts"],
    globalSetup: ["./src/global-setup.ts"],
    env: testStackEnv,
    pool: "forks",
    fileParallelism: false,
    testTimeout: 2_400_000,
    hookTimeout: 600_000,
  },
});
