import type { RewardConfig } from "@bridle/contracts";
import type { SandboxHost } from "@bridle/harbor";
import { createApp, type Logger, Semaphore } from "@bridle/service-kit";
import { verificationRoutes } from "./routes/verifications.ts";

export interface VerifierDeps extends SandboxHost {
  log: Logger;
  tasksUrl: string;
  concurrency: number;
  reward: RewardConfig;
  memoryMb: number;
  bodyLimitBytes?: number;
}

/** The verifier service: hidden tests in a sandbox, then the reward. */
export function createVerifierApp(deps: VerifierDeps) {
  const app = createApp({
    name: "verifier",
    description:
      "Runs a task's hidden tests in a bubblewrap sandbox over a finished workspace and computes the reward",
    log: deps.log,
    bodyLimitBytes: deps.bodyLimitBytes,
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
