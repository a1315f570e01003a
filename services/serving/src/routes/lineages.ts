import { DecisionRequest, LineageDecision, LineageList, LineageView } from "@bridle/contracts";
import { createRouter, errorContent, jsonBody, jsonContent } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import type { AdapterManager } from "../adapters.ts";

const part = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/);
const KeyParams = z.object({ model: part, harness: part });

/**
 * Lineages: the adapters of one (base model, harness), each version with its parent, the promoted
 * version and the decisions that made it so. The promotion and rollback workflows decide here.
 */
export function lineageRoutes(manager: AdapterManager) {
  return createRouter()
    .openapi(
      createRoute({
        method: "get",
        path: "/lineages",
        summary: "Every lineage: its promoted version, decisions and adapters",
        responses: { 200: jsonContent(LineageList, "Lineages") },
      }),
      (c) => c.json({ lineages: manager.lineages() }, 200),
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/lineages/{model}/{harness}",
        summary: "One lineage (empty when it has no adapter yet: the base model alone)",
        request: { params: KeyParams },
        responses: { 200: jsonContent(LineageView, "Lineage") },
      }),
      (c) => c.json(manager.lineage(c.req.valid("param")), 200),
    )
    .openapi(
      createRoute({
        method: "post",
        path: "/lineages/{model}/{harness}/decisions",
        summary:
          "Promote a serving version, or roll the promoted one back to what was promoted before it; once per decision id",
        request: {
          params: KeyParams,
          body: jsonBody(DecisionRequest),
        },
        responses: {
          200: jsonContent(LineageDecision, "The decision (the same one again for a repeated id)"),
          400: errorContent("Invalid request, or an adapter of another lineage"),
          404: errorContent("Unknown version"),
          409: errorContent(
            "Promote: the version is not serving, or already promoted; rollback: it is not the promoted version",
          ),
        },
      }),
      (c) => c.json(manager.decide(c.req.valid("param"), c.req.valid("json")), 200),
    );
}
