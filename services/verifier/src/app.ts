import type { RewardConfig } from "@bridle/contracts";
import type { EnvironmentImages } from "@bridle/sandbox";
import { createApp, type Logger, Semaphore } from "@bridle/service-kit";
import { verificationRoutes } from "./routes/verifications.ts";

export interface VerifierDeps {
  log: Logger;
  tasksUrl: string;
  concurrency: number;
  reward: RewardConfig;
  memoryMb: number;
  sandboxDir?: string | undefined;
  /** Variables of the user's environment that tasks' `${VAR}` references may read. */
  allowedEnv?: readonly string[];
  /** The verifier toolchain on this host, shown read-only to the tests. */
  toolchain?: string | undefined;
  /** Tasks' images unpacked on this host (the tasks service builds them). */
  images?: EnvironmentImages | undefined;
  bodyLimitBytes?: number;
}

/** The verifier service: hidden tests in a sandbox, then the reward. */
export function createVerifierApp(deps: VerifierDeps) {
  const app = createApp({
    name: "verifier",
    description:
      "Runs a task's hidden tests in a bubblewrap sandbox over a finished workspace and computes the reward",
    log: deps.log,
    ...(deps.bodyLimitBytes ? { bodyLimitBytes: deps.bodyLimitBytes } : {}),
  });
  const limiter = new Semaphore(deps.concurrency);
  app.route(
    "/v1",
    verificationRoutes({
      tasksUrl: deps.tasksUrl,
      limiter,
      reward: deps.reward,
      memoryMb: deps.memoryMb,
      sandboxDir: deps.sandboxDir,
      allowedEnv: deps.allowedEnv ?? [],
      toolchain: deps.toolchain,
      images: deps.images,
    }),
  );
  return app;
}
