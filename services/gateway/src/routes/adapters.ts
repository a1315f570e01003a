import { AdapterView, ErrorBody } from "@bridle/contracts";
import { callJson, createRouter, httpError } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";

const Adapters = z.object({ adapters: z.array(AdapterView) });

/**
 * Adapter versions, read from the serving service's registry. A read-only view: every change to
 * adapters goes through a workflow.
 */
export function adapterRoutes(servingUrl: string) {
  return createRouter().openapi(
    createRoute({
      method: "get",
      path: "/",
      summary: "Every adapter and its versions (state, hash, the step that produced it)",
      responses: {
        200: { description: "Adapters", content: { "application/json": { schema: Adapters } } },
        503: { description: "Serving unavailable", content: { "application/json": { schema: ErrorBody } } },
      },
    }),
    async (c) => {
      const list = await callJson(`${servingUrl}/v1/adapters`, { schema: Adapters }).catch((err: unknown) => {
        throw httpError(
          503,
          "serving_unavailable",
          `the serving service is unavailable: ${(err as Error).message}`,
          { retryable: true },
        );
      });
      return c.json(list, 200);
    },
  );
}
