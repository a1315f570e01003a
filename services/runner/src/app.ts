import { artifactRoutes, createApp } from "@bridle/service-kit";
import type { RolloutDeps } from "./rollout.ts";
import { rolloutRoutes } from "./routes/rollouts.ts";

/** The runner: one harness on one task, through the guard, in a sandbox, then the verifier. */
export function createRunnerApp(deps: RolloutDeps & { maxConcurrent: number; bodyLimitBytes?: number }) {
  const app = createApp({
    name: "runner",
    description: "Sandboxed harness rollouts through the guard, verified",
    log: deps.log,
    bodyLimitBytes: deps.bodyLimitBytes,
  });
  app.route("/v1/rollouts", rolloutRoutes(deps, deps.maxConcurrent));
  app.route("/v1", artifactRoutes(deps.artifacts));
  return app;
}
