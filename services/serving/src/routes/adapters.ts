import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { AdapterList, AdapterVersion, AdapterView, adapterName, LoadAdapterRequest } from "@bridle/contracts";
import { createRouter, errorContent, httpError, jsonBody, jsonContent } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import type { AdapterManager } from "../adapters.ts";

const part = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/);
const NameParams = z.object({ model: part, harness: part, run: part });
const VersionParams = NameParams.extend({ version: z.coerce.number().int().min(1) });
const base = "/adapters/{model}/{harness}/{run}";
/** How long a read with `?wait=true` waits for a load to end. */
const WAIT_MS = 60_000;

/** The adapter registry: versions of `<model>/<harness>/<run>`, loaded under `<name>@v<N>`. */
export function adapterRoutes(manager: AdapterManager) {
  return createRouter()
    .openapi(
      createRoute({
        method: "get",
        path: "/adapter-files/{hash}/{file}",
        summary:
          "The files of a version serving or loading, by content hash: what the model servers load an adapter from (Bridle's vLLM plugin checks them against the hash)",
        request: {
          params: z.object({
            hash: z.string().regex(/^[0-9a-f]{64}$/),
            file: z.enum(["adapter_config.json", "adapter_model.safetensors"]),
          }),
        },
        responses: {
          200: {
            description: "The file's bytes",
            content: { "application/octet-stream": { schema: z.string().openapi({ format: "binary" }) } },
          },
          404: errorContent("No version serving or loading has this hash"),
        },
      }),
      async (c) => {
        const { hash, file } = c.req.valid("param");
        const dir = manager.filesOf(hash);
        if (!dir)
          throw httpError(404, "adapter_not_found", `no version serving or loading has content ${hash}`);
        const bytes = await readFile(join(dir, file)).catch(() => {
          throw httpError(404, "adapter_gone", `the version with content ${hash} has no ${file}`);
        });
        return c.body(bytes, 200, { "content-type": "application/octet-stream" });
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/adapters",
        summary: "Every adapter and its versions",
        responses: { 200: jsonContent(AdapterList, "Adapters") },
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
        summary:
          "Submit a new version: it is loaded, proven with the canary and old ones retired by retention in the background; read the version to see it end",
        request: {
          params: NameParams,
          body: jsonBody(LoadAdapterRequest),
        },
        responses: {
          202: jsonContent(AdapterVersion, "Accepted: the version is loading (or was already submitted)"),
          200: jsonContent(AdapterVersion, "The same content is already serving as this version"),
          400: errorContent("Invalid request"),
          409: errorContent("The version number is taken by other content"),
          422: errorContent("The adapter is invalid"),
        },
      }),
      (c) => {
        const version = manager.submit(adapterName(c.req.valid("param")), c.req.valid("json"));
        return version.state === "serving" ? c.json(version, 200) : c.json(version, 202);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: `${base}/versions/{version}`,
        summary:
          "One version: `loading` until its load ends as `serving` or `failed` (the error says why: the canary, vLLM's refusal, the model server down)",
        request: {
          params: VersionParams,
          query: z.object({
            wait: z
              .enum(["true", "false"])
              .default("false")
              .describe("Answer once the load has ended (60 s at most)"),
          }),
        },
        responses: {
          200: jsonContent(AdapterVersion, "The version"),
          404: errorContent("Unknown version"),
        },
      }),
      async (c) => {
        const p = c.req.valid("param");
        const name = adapterName(p);
        const wait = c.req.valid("query").wait === "true" ? WAIT_MS : 0;
        const v = await manager.settled(name, p.version, wait);
        if (!v) throw httpError(404, "adapter_not_found", `no version ${p.version} of ${name}`);
        return c.json(v, 200);
      },
    )
    .openapi(
      createRoute({
        method: "delete",
        path: `${base}/versions/{version}`,
        summary: "Retire (unload) a version; a version still loading is cancelled",
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
