import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createLogger, readGrant } from "@bridle/service-kit";
import { runTsx } from "@bridle/service-kit/testing";
import { describe, expect, it } from "vitest";
import { createGuardApp } from "./app.ts";
import { CaptureStore } from "./capture.ts";
import { ModelRouter } from "./proxy/router.ts";

function makeApp(adminToken?: string) {
  const store = new CaptureStore(mkdtempSync(join(tmpdir(), "bridle-guard-app-")));
  const log = createLogger("guard-test", "silent");
  const app = createGuardApp({
    log,
    store,
    // Never called by these tests: they exercise the admin API only.
    upstream: new ModelRouter(["http://127.0.0.1:19397"], 1_000, log),
    deadlines: { firstEventMs: 1_000, idleMs: 1_000 },
    adminToken,
  });
  return { app, store };
}

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});

describe("guard admin API", () => {
  it("registers a session, shows it without its key, and survives a restart of the store", async () => {
    const { app, store } = makeApp();
    const res = await app.request(
      "/admin/sessions",
      json({ instruction: "do x", adapter: "a@1", apiKey: "key-12345678" }),
    );
    expect(res.status).toBe(201);
    const { id, apiKey } = (await res.json()) as { id: string; apiKey: string };
    expect(apiKey).toBe("key-12345678");
    const view = (await (await app.request(`/admin/sessions/${id}`)).json()) as Record<string, unknown>;
    expect(view).toMatchObject({ id, adapter: "a@1", mode: "block", capture: true, calls: 0 });
    expect(view.apiKey).toBeUndefined();
    const reloaded = new CaptureStore(store.dataDir);
    expect(await reloaded.load()).toBe(1);
    expect(reloaded.sessionByKey("key-12345678")?.id).toBe(id);
  });

  it("rejects a bad registration naming the field, a reused key, and an unknown session", async () => {
    const { app } = makeApp();
    const bad = await app.request("/admin/sessions", json({ instruction: "x", mode: "maybe" }));
    expect(bad.status).toBe(400);
    const issues = ((await bad.json()) as { error: { issues: { path: string }[] } }).error.issues.map(
      (i) => i.path,
    );
    expect(issues).toEqual(expect.arrayContaining(["body.adapter", "body.mode"]));
    const body = { instruction: "x", adapter: "a", apiKey: "same-key-123" };
    expect((await app.request("/admin/sessions", json(body))).status).toBe(201);
    expect((await app.request("/admin/sessions", json(body))).status).toBe(409);
    expect((await app.request("/admin/sessions/nope/trajectory")).status).toBe(404);
  });

  it("guards the admin API with a token when one is set, and documents it in /openapi.json", async () => {
    const { app } = makeApp("admin-token-0123456789");
    expect((await app.request("/admin/sessions", json({ instruction: "x", adapter: "a" }))).status).toBe(401);
    const ok = await app.request(
      "/admin/sessions",
      json({ instruction: "x", adapter: "a" }, { authorization: "Bearer admin-token-0123456789" }),
    );
    expect(ok.status).toBe(201);
    const doc = (await (await app.request("/openapi.json")).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        "/admin/sessions",
        "/admin/sessions/{id}/trajectory",
        "/admin/sessions/{id}/end",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/models",
      ]),
    );
  });

  it("opens one session's trajectory, and nothing else, to a holder of that session's read grant", async () => {
    const token = "admin-token-0123456789";
    const { app } = makeApp(token);
    const register = async () => {
      const res = await app.request(
        "/admin/sessions",
        json({ instruction: "x", adapter: "a" }, { authorization: `Bearer ${token}` }),
      );
      return ((await res.json()) as { id: string }).id;
    };
    const [mine, other] = [await register(), await register()];
    const read = (id: string, grant: string) =>
      app.request(`/admin/sessions/${id}/trajectory?grant=${encodeURIComponent(grant)}`);
    const ok = await read(mine, readGrant(token, mine));
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { sessionId: string }).sessionId).toBe(mine);
    // Another session's grant, a grant made with another secret, none, or a grant on another route.
    expect((await read(other, readGrant(token, mine))).status).toBe(401);
    expect((await read(mine, readGrant("another-secret-0123456789", mine))).status).toBe(401);
    expect((await read(mine, "")).status).toBe(401);
    expect((await app.request(`/admin/sessions/${mine}?grant=${readGrant(token, mine)}`)).status).toBe(401);
    const end = await app.request(`/admin/sessions/${mine}/end?grant=${readGrant(token, mine)}`, {
      method: "POST",
    });
    expect(end.status).toBe(401);
  });
});

describe("guard proxy routes inside the Hono app", () => {
  it("answer an unknown key with 401 and malformed JSON with 400, in the OpenAI error shape", async () => {
    const { app } = makeApp();
    const unknown = await app.request(
      "/v1/chat/completions",
      json({ messages: [] }, { authorization: "Bearer nope" }),
    );
    expect(unknown.status).toBe(401);
    expect(await unknown.json()).toMatchObject({ error: { type: "unknown_session" } });
    await app.request("/admin/sessions", json({ instruction: "x", adapter: "a", apiKey: "key-abcdefgh" }));
    const malformed = await app.request("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: "Bearer key-abcdefgh" },
      body: "{oops",
    });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: { message: string } }).error.message).toContain(
      "not valid JSON",
    );
  });

  it("refuses to start without an admin token, naming the setting (a sandbox reaches this port)", () => {
    const result = runTsx(fileURLToPath(new URL("main.ts", import.meta.url)), [], {
      env: { PORT: "1" },
      cleanEnv: true,
    });
    expect(result.status).not.toBe(0);
    expect(result.stderr + result.stdout).toMatch(/GUARD_ADMIN_TOKEN.*closed by default/);
  });
});
