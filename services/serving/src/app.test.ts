import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@bridle/service-kit";
import { errorOf, issuePaths, openApiOf } from "@bridle/service-kit/testing";
import { describe, expect, it } from "vitest";
import { AdapterManager } from "./adapters.ts";
import { createServingApp } from "./app.ts";
import { ModelPool } from "./pool.ts";
import { AdapterRegistry } from "./registry.ts";

// Port 1 has no model server: the real "model server down" path, not a stand-in.
const log = createLogger("serving", "silent");
const pool = ModelPool.of(["http://127.0.0.1:1"], 2_000);
const dir = mkdtempSync(join(tmpdir(), "bridle-serving-test-"));
const registry = new AdapterRegistry(dir);
const limits = {
  maxLoras: 2,
  maxLoraRank: 16,
  keepVersions: 2,
  monitorMs: 60_000,
  filesDir: join(dir, "adapters"),
};
const app = createServingApp({ log, pool, adapters: new AdapterManager(registry, pool, limits, log) });

describe("serving API contract", () => {
  it("rejects an invalid completion request with 400 and paths", async () => {
    const res = await app.request("/v1/completions", {
      method: "POST",
      body: JSON.stringify({ prompt: "", maxTokens: 100_000 }),
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(400);
    expect(await issuePaths(res)).toEqual(["body.maxTokens", "body.prompt"]);
  });

  it("reports a model server that is down as a retryable 503", async () => {
    const res = await app.request("/v1/base-model");
    expect(res.status).toBe(503);
    expect(await errorOf(res)).toMatchObject({ code: "model_server_unavailable", retryable: true });
  });

  it("serves its OpenAPI document", async () => {
    const doc = await openApiOf(await app.request("/openapi.json"));
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/v1/base-model", "/v1/completions"]));
  });
});
