import { createRoute, z } from "@hono/zod-openapi";
import { describe, expect, it } from "vitest";
import { createApp, createRouter } from "./app.ts";
import { bearerMatches, requireBearer } from "./auth.ts";
import { httpError } from "./errors.ts";
import { createLogger } from "./logger.ts";
import { errorOf, issuePaths, openApiOf } from "./testing.ts";

function testApp(bodyLimitBytes = 1_024) {
  const app = createApp({ name: "test", log: createLogger("test", "silent"), bodyLimitBytes });
  const items = createRouter()
    .openapi(
      createRoute({
        method: "post",
        path: "/",
        request: {
          body: {
            content: {
              "application/json": { schema: z.object({ name: z.string(), size: z.number().int().min(1) }) },
            },
          },
        },
        responses: {
          200: {
            description: "ok",
            content: { "application/json": { schema: z.object({ ok: z.boolean() }) } },
          },
        },
      }),
      (c) => c.json({ ok: true }, 200),
    )
    .get("/teapot", () => {
      throw httpError(409, "conflict_here", "that item is busy");
    })
    .get("/boom", () => {
      throw new Error("a bug");
    });
  app.route("/items", items);
  return app;
}

const post = (body: string) =>
  testApp().request("/items", { method: "POST", body, headers: { "content-type": "application/json" } });

describe("createApp", () => {
  it("answers invalid bodies with 400 and the zod issue paths", async () => {
    const res = await post(JSON.stringify({ name: 3, size: 0 }));
    expect(res.status).toBe(400);
    const error = await errorOf(res.clone());
    expect(error.code).toBe("invalid_request");
    expect(await issuePaths(res)).toEqual(["body.name", "body.size"]);
    expect(error.requestId).toEqual(res.headers.get("x-request-id"));
  });

  it("answers malformed JSON with 400, not a crash", async () => {
    const res = await post("{not json");
    expect(res.status).toBe(400);
    expect((await errorOf(res)).code).toBe("invalid_request");
  });

  it("answers bodies over the limit with 413", async () => {
    const res = await post(JSON.stringify({ name: "x".repeat(5_000), size: 1 }));
    expect(res.status).toBe(413);
    expect((await errorOf(res)).code).toBe("payload_too_large");
  });

  it("answers unknown routes with a JSON 404", async () => {
    const res = await testApp().request("/nowhere");
    expect(res.status).toBe(404);
    expect((await errorOf(res)).message).toContain("GET /nowhere");
  });

  it("renders an httpError with its status and code", async () => {
    const res = await testApp().request("/items/teapot");
    expect(res.status).toBe(409);
    expect(await errorOf(res)).toMatchObject({ code: "conflict_here", message: "that item is busy" });
  });

  it("hides unexpected errors behind a 500 that carries the request id", async () => {
    const res = await testApp().request("/items/boom", { headers: { "x-request-id": "req-42" } });
    expect(res.status).toBe(500);
    expect(await errorOf(res)).toMatchObject({ code: "internal", requestId: "req-42" });
  });

  it("serves its OpenAPI document with the routes it mounts", async () => {
    const res = await testApp().request("/openapi.json");
    expect(res.status).toBe(200);
    const doc = await openApiOf(res);
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toContain("/items");
  });
});

describe("bearer tokens and request ids", () => {
  it("compares bearer tokens in constant time and answers 401 without the right one", async () => {
    expect(bearerMatches("Bearer s3cret-token-0123456789", "s3cret-token-0123456789")).toBe(true);
    expect(bearerMatches("Bearer s3cret-token-012345678", "s3cret-token-0123456789")).toBe(false);
    expect(bearerMatches(undefined, "s3cret-token-0123456789")).toBe(false);
    const app = createApp({ name: "t", description: "t", log: createLogger("t", "silent") });
    app.use("/v1/*", requireBearer("s3cret-token-0123456789", "needs the token"));
    app.get("/v1/x", (c) => c.json({ ok: true }));
    expect((await app.request("/v1/x")).status).toBe(401);
    const ok = await app.request("/v1/x", { headers: { authorization: "Bearer s3cret-token-0123456789" } });
    expect(ok.status).toBe(200);
  });

  it("keeps a caller's request id only when it is short and plain", async () => {
    const app = createApp({ name: "t", description: "t", log: createLogger("t", "silent") });
    const id = async (value: string) =>
      (await app.request("/healthz", { headers: { "x-request-id": value } })).headers.get("x-request-id");
    expect(await id("run-42.step:3")).toBe("run-42.step:3");
    expect(await id("x".repeat(256))).toMatch(/^[0-9a-f-]{36}$/);
    expect(await id("a b\u0007<script>")).toMatch(/^[0-9a-f-]{36}$/);
  });
});
