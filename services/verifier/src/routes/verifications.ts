import { VerificationRequest, VerificationResult } from "@bridle/contracts";
import { createRouter, errorContent, jsonBody } from "@bridle/service-kit";
import { createRoute } from "@hono/zod-openapi";
import { type VerifyDeps, verify } from "../verify.ts";

/** Verifications: run a task's hidden tests over a finished workspace and score it. */
export function verificationRoutes(deps: VerifyDeps) {
  return createRouter().openapi(
    createRoute({
      method: "post",
      path: "/verifications",
      summary: "Run the task's tests over a finished workspace and compute the reward",
      description:
        "An environment failure (tests timed out, crashed, or wrote no reward) gives `reward: null`: exclude the rollout, never score it 0.",
      request: { body: jsonBody(VerificationRequest) },
      responses: {
        200: { description: "Verified", content: { "application/json": { schema: VerificationResult } } },
        400: errorContent("Invalid request or workspace"),
        404: errorContent("Unknown task"),
        503: errorContent("Tasks service unavailable (retryable)"),
      },
    }),
    async (c) => {
      const request = c.req.valid("json");
      const result = await verify(deps, request);
      c.get("log").info(
        {
          taskId: result.taskId,
          reward: result.reward,
          failure: result.outcome.failure,
          ms: Math.round(result.outcome.durationMs),
        },
        "verified",
      );
      return c.json(result, 200);
    },
  );
}
