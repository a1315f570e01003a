import { AdapterVersion, AdapterView, adapterName, LoadAdapterRequest } from "@bridle/contracts";
import { createRouter, errorContent, httpError, jsonContent } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import type { AdapterManager } from "../adapters.ts";

const part = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/);
const NameParams = z.object({ model: part, harness: part, run: part });
const VersionParams = NameParams.extend({ version: z.coerce.number().int().min(1) });
const base = "/adapters/{model}/{harness}/{run}";

/** The adapter registry: versions of `<model>/<harness>/<run>`, loaded under `<name>@v<N>`. */
export function adapterRoutes(manager: AdapterManager) {
  return createRouter()
    .openapi(
      createRoute({
        method: "get",
        path: "/adapters",
        summary: "Every adapter and its versions",
        responses: { 200: jsonContent(z.object({ adapters: z.array(AdapterView) }), "Adapters") },
      }),
      (c) => c.json({ adapters: manager.list() }, 200),
    )
    .openapi(
      createRoute({
        method: "get",
        path: base,
        summary: "One adapter: its versions and which one serves its bare name",
        request: { params: NameParams },
        responses: { 200: jsonContent(AdapterView, "Adapter"), 404: errorContent("Unknown adapter") },
      }),
      (c) => {
        const name = adapterName(c.req.valid("param"));
        const view = manager.view(name);
        if (!view) throw httpError(404, "adapter_not_found", `no adapter named ${name}`);
        return c.json(view, 200);
      },
    )
    .openapi(
      createRoute({
        method: "post",
        path: `${base}/versions`,
        summary: "Load a new version, prove it with the canary, retire old ones by retention",
        request: {
          params: NameParams,
          body: { content: { "application/json": { schema: LoadAdapterRequest } }, required: true },
        },
        responses: {
          201: jsonContent(AdapterVersion, "The version is serving"),
          400: errorContent("Invalid request"),
          409: errorContent("Version exists, or no adapter slot is free"),
          422: errorContent("The adapter is invalid, vLLM refused it, or it equals the base model (canary)"),
          503: errorContent("The model server is unavailable (retryable)"),
        },
      }),
      async (c) => {
        const version = await manager.load(adapterName(c.req.valid("param")), c.req.valid("json"));
        return c.json(version, 201);
      },
    )
    .openapi(
      createRoute({
        method: "delete",
        path: `${base}/versions/{version}`,
        summary: "Retire (unload) a version",
        request: { params: VersionParams },
        responses: {
          200: jsonContent(AdapterVersion, "The retired version"),
          404: errorContent("Unknown version"),
        },
      }),
      async (c) => {
        const p = c.req.valid("param");
        return c.json(await manager.retire(adapterName(p), p.version), 200);
      },
    );
}
