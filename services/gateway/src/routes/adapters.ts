import { AdapterList, ErrorBody } from "@bridle/contracts";
import { callJson, createRouter, httpError } from "@bridle/service-kit";
import { createRoute } from "@hono/zod-openapi";

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
        200: { description: "AdapterList", content: { "application/json": { schema: AdapterList } } },
        503: { description: "Serving unavailable", content: { "application/json": { schema: ErrorBody } } },
      },
    }),
    async (c) => {
      const list = await callJson(`${servingUrl}/v1/adapters`, { schema: AdapterList }).catch(
        (err: unknown) => {
          throw httpError(
            503,
            "serving_unavailable",
            `the serving service is unavailable: ${(err as Error).message}`,
            { retryable: true },
          );
        },
      );
      return c.json(list, 200);
    },
  );
}
