import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { errorOf, issuePaths, openApiOf } from "@bridle/service-kit/testing";
import { describe, expect, it } from "vitest";
import { appWithoutModelServer } from "./test-support.ts";

// Port 1 has no model server: the real "model server down" path, not a stand-in.
const { app, registry, dir } = appWithoutModelServer("bridle-serving-test-");

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
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        "/v1/base-model",
        "/v1/completions",
        "/v1/nodes",
        "/v1/adapter-files/{hash}/{file}",
      ]),
    );
  });

  it("maps its pool of model servers, each down here", async () => {
    const res = await app.request("/v1/nodes");
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      baseModel: null,
      serving: [],
      nodes: [{ url: "http://127.0.0.1:1", state: "down", models: [] }],
    });
  });

  it("hands the model servers the files of a version serving, by content hash, and nothing else", async () => {
    const folder = join(dir, "v1");
    mkdirSync(folder);
    writeFileSync(join(folder, "adapter_config.json"), '{"r": 8}');
    writeFileSync(join(folder, "adapter_model.safetensors"), "weights");
    const hash = "a".repeat(64);
    registry.insert({ name: "m/pi/files", version: 1, path: folder, hash, step: 1, parent: null });
    // Loading: a model server fetches while the version loads.
    const config = await app.request(`/v1/adapter-files/${hash}/adapter_config.json`);
    expect(config.status).toBe(200);
    expect(await config.text()).toBe('{"r": 8}');
    registry.setState("m/pi/files", 1, "retired");
    expect((await app.request(`/v1/adapter-files/${hash}/adapter_config.json`)).status).toBe(404);
    expect((await app.request(`/v1/adapter-files/${hash}/secrets.txt`)).status).toBe(400);
    expect((await app.request("/v1/adapter-files/..%2F..%2Fetc/adapter_config.json")).status).toBe(400);
  });
});
