import { fileURLToPath } from "node:url";
import { createLogger } from "@bridle/service-kit";
import { errorOf, issuePaths, openApiOf, runTsx } from "@bridle/service-kit/testing";
import { Client, Connection } from "@temporalio/client";
import { describe, expect, it } from "vitest";
import { createGatewayApp } from "./app.ts";
import { failureMessage } from "./temporal.ts";

// The contract checks below are answered before Temporal is called, so a lazy connection to a
// closed port is enough here; the real workflow path is covered in test/ on the running stack.
const temporal = new Client({ connection: Connection.lazy({ address: "127.0.0.1:1" }), namespace: "bridle" });
const log = createLogger("gateway", "silent");
const token = "a-token-of-sufficient-length";
const bearer = { authorization: `Bearer ${token}` };
const gateway = (apiToken: string) =>
  createGatewayApp({
    log,
    temporal,
    namespace: "bridle",
    uiUrl: "http://127.0.0.1:8233",
    servingUrl: "http://127.0.0.1:1",
    trainerUrl: "http://127.0.0.1:1",
    apiToken,
  });
/** The gateway called with its token, as the CLI calls it. */
const app = () => {
  const inner = gateway(token);
  return {
    request: (path: string, init: RequestInit = {}) =>
      inner.request(path, { ...init, headers: { ...bearer, ...(init.headers as Record<string, string>) } }),
  };
};

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  body: JSON.stringify(body),
  headers: { "content-type": "application/json", ...headers },
});

describe("gateway API contract", () => {
  it("rejects an invalid probe with 400 and the zod issue paths", async () => {
    const res = await app().request("/v1/probes", json({ maxTokens: 1000, prompt: "", surprise: true }));
    expect(res.status).toBe(400);
    expect(await issuePaths(res)).toEqual(["body", "body.maxTokens", "body.prompt"]);
  });

  it("rejects a malformed probe id with 400", async () => {
    const res = await app().request("/v1/probes/has%20spaces");
    expect(res.status).toBe(400);
    expect(await issuePaths(res)).toEqual(["param.id"]);
  });

  it("promotes by hand only a versioned name, and says when serving cannot be read", async () => {
    const bare = await app().request(
      "/v1/lineages/m/pi/promotions",
      json({ adapter: "m/pi/r", reason: "x" }),
    );
    expect(bare.status).toBe(400);
    expect(await issuePaths(bare)).toEqual(["body.adapter"]);
    const noReason = await app().request("/v1/lineages/m/pi/rollbacks", json({}));
    expect(await issuePaths(noReason)).toEqual(["body.reason"]);
    const down = await app().request("/v1/lineages/m/pi/rollbacks", json({ reason: "regressed" }));
    expect(down.status).toBe(503);
    expect(await errorOf(down)).toMatchObject({ code: "serving_unavailable", retryable: true });
    const fromNothing = await app().request("/v1/runs", json({ name: "r", start: "promoted" }));
    expect(fromNothing.status).toBe(503); // the lineage cannot be read: refused before any workflow
  });

  it("answers unknown routes with 404", async () => {
    const res = await app().request("/v1/nothing-here");
    expect(res.status).toBe(404);
    expect((await errorOf(res)).code).toBe("not_found");
  });

  it("is closed by default: every /v1 route needs the token, and there is no gateway without one", async () => {
    const guarded = gateway(token);
    for (const path of ["/v1/probes/probe-1", "/v1/runs", "/v1/evals/e-1", "/v1/adapters"]) {
      const res = await guarded.request(path);
      expect(res.status, path).toBe(401);
      expect((await errorOf(res)).message).toMatch(/bearer token/);
    }
    const wrong = await guarded.request("/v1/probes", json({}, { authorization: "Bearer nope" }));
    expect(wrong.status).toBe(401);
    const started = await guarded.request(
      "/v1/runs",
      json({ name: "x" }, { authorization: `Bearer ${token}x` }),
    );
    expect(started.status).toBe(401);
    expect((await guarded.request("/healthz")).status).toBe(200);
    expect(() => gateway("")).toThrow(/at least 16 characters/);
    expect(() => gateway("short")).toThrow(/at least 16 characters/);
  });

  it("refuses to start without a token, naming the setting", () => {
    const result = runTsx(fileURLToPath(new URL("main.ts", import.meta.url)), [], {
      env: { PORT: "1" },
      cleanEnv: true,
    });
    expect(result.status).not.toBe(0);
    expect(result.stderr + result.stdout).toMatch(/BRIDLE_API_TOKEN.*closed by default/);
  });

  it("serves the dashboard's page and files without a token, with a strict content policy, and nothing else", async () => {
    const unauthenticated = gateway(token);
    const page = await unauthenticated.request("/ui/");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    const html = await page.text();
    for (const file of ["app.js", "app.css", "uplot.js", "uplot.css"]) {
      expect(html).toContain(file);
      expect((await unauthenticated.request(`/ui/${file}`)).status).toBe(200);
    }
    expect((await unauthenticated.request("/ui/uplot.js")).headers.get("content-type")).toMatch(/javascript/);
    expect((await unauthenticated.request("/ui/secrets.json")).status).toBe(404);
    expect((await unauthenticated.request("/ui/..%2Fsrc%2Fenv.ts")).status).toBe(404);
    const root = await unauthenticated.request("/");
    expect(root.status).toBe(302);
    expect(root.headers.get("location")).toBe("/ui/");
    // The page holds no data: what it shows comes from /v1, which still needs the token.
    expect((await unauthenticated.request("/v1/evals")).status).toBe(401);
  });

  it("serves its OpenAPI document", async () => {
    const doc = await openApiOf(await app().request("/openapi.json"));
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/v1/probes", "/v1/probes/{id}"]));
  });
});

describe("why a job failed", () => {
  it("is said in the innermost cause's words, not the activity wrapper's", () => {
    const own = new Error("serving knows no model 'nope@v9'");
    const activity = new Error("Activity task failed", { cause: own });
    expect(failureMessage(new Error("Workflow execution failed", { cause: activity }))).toBe(own.message);
    expect(failureMessage(own)).toBe(own.message);
    expect(failureMessage("plain")).toBe("plain");
  });
});
