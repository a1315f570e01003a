import type { LineageDecision, LineageList, LineageView } from "@bridle/contracts";
import { errorOf } from "@bridle/service-kit/testing";
import { describe, expect, it } from "vitest";
import { AdapterRegistry } from "./registry.ts";
import { appWithoutModelServer } from "./test-support.ts";

// Decisions read and write serving's registry only: no model server is needed.
const { app, registry, dir } = appWithoutModelServer("bridle-lineage-test-");

const r1 = "qwen/pi/r1";
const r2 = "qwen/pi/r2";
function serving(name: string, version: number, parent: { name: string; version: number } | null) {
  registry.insert({
    name,
    version,
    path: `/adapters/${name}/${version}`,
    hash: `${name}${version}`,
    step: version,
    parent,
  });
  registry.setState(name, version, "serving");
}
serving(r1, 1, null);
serving(r1, 2, { name: r1, version: 1 });
serving(r2, 1, { name: r1, version: 2 }); // a run that started from r1@v2
serving("qwen/hermes/r3", 1, null);

async function decide(body: object, lineage = "qwen/pi") {
  return app.request(`/v1/lineages/${lineage}/decisions`, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
}
async function promoted(): Promise<string | null> {
  const view = (await (await app.request("/v1/lineages/qwen/pi")).json()) as LineageView;
  return view.promoted?.servedName ?? null;
}
const promote = (id: string, name: string, version: number) =>
  decide({ id, action: "promote", adapter: { name, version }, reason: `eval ${id} says so`, evalId: id });
const rollback = (id: string, name: string, version: number) =>
  decide({ id, action: "rollback", adapter: { name, version }, reason: `eval ${id} regressed`, evalId: id });

describe("lineages: promotion and rollback per (model, harness)", () => {
  it("promotes serving versions in turn and rolls each back to what was promoted before it, then to the base", async () => {
    expect(await promoted()).toBeNull();
    expect((await promote("p1", r1, 1)).status).toBe(200);
    const again = await promote("p1", r1, 1); // a retried workflow: the same decision, not a second
    expect(((await again.json()) as LineageDecision).id).toBe("p1");
    expect((await promote("p2", r1, 2)).status).toBe(200);
    const third = (await (await promote("p3", r2, 1)).json()) as LineageDecision;
    expect(third).toMatchObject({ action: "promote", previous: { name: r1, version: 2 }, evalId: "p3" });
    expect(await promoted()).toBe(`${r2}@v1`);

    // A stale rollback (of a version no longer promoted) changes nothing.
    const stale = await rollback("b0", r1, 2);
    expect(stale.status).toBe(409);
    expect(await errorOf(stale)).toMatchObject({ code: "not_promoted" });
    expect((await rollback("b1", r2, 1)).status).toBe(200);
    expect(await promoted()).toBe(`${r1}@v2`);
    // r1@v1 is no longer serving: the rollback of r1@v2 skips it, to the base model alone.
    registry.setState(r1, 1, "failed", { error: { code: "served_as_base", message: "canary" } });
    const last = (await (await rollback("b2", r1, 2)).json()) as LineageDecision;
    expect(last).toMatchObject({ action: "rollback", adapter: null, previous: { name: r1, version: 2 } });
    expect(await promoted()).toBeNull();

    const view = (await (await app.request("/v1/lineages/qwen/pi")).json()) as LineageView;
    expect(view.decisions.map((d) => `${d.action}:${d.id}`)).toEqual([
      "promote:p1",
      "promote:p2",
      "promote:p3",
      "rollback:b1",
      "rollback:b2",
    ]);
    expect(view.adapters.map((a) => a.name)).toEqual([r1, r2]);
    expect(view.adapters[1]!.versions[0]!.parent).toEqual({ name: r1, version: 2 });
    // The registry keeps it across a restart of the service.
    const reopened = new AdapterRegistry(dir);
    expect(reopened.promoted({ model: "qwen", harness: "pi" })).toBeNull();
    expect(reopened.decisions({ model: "qwen", harness: "pi" })).toHaveLength(5);
    expect(reopened.everPromoted(r2, 1)).toBe(true);
    expect(reopened.everPromoted("qwen/hermes/r3", 1)).toBe(false);
  });

  it("refuses another lineage's adapter, an unknown or failed version, a repeat promotion, and a bad body", async () => {
    const other = await promote("x1", "qwen/hermes/r3", 1);
    expect(other.status).toBe(400);
    expect(await errorOf(other)).toMatchObject({ code: "wrong_lineage" });
    expect(await errorOf(await promote("x2", r1, 9))).toMatchObject({ code: "adapter_not_found" });
    expect(await errorOf(await promote("x3", r1, 1))).toMatchObject({ code: "adapter_not_serving" });
    expect((await promote("x4", r2, 1)).status).toBe(200);
    expect(await errorOf(await promote("x5", r2, 1))).toMatchObject({ code: "already_promoted" });
    const bad = await decide({ id: "x6", action: "demote", adapter: { name: r1, version: 1 }, reason: "" });
    expect(bad.status).toBe(400);
    const list = (await (await app.request("/v1/lineages")).json()) as LineageList;
    expect(list.lineages.map((l) => `${l.model}/${l.harness}:${l.promoted?.servedName ?? "base"}`)).toEqual([
      "qwen/hermes:base",
      `qwen/pi:${r2}@v1`,
    ]);
  });
});
