import { statSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { ProbeView } from "@bridle/contracts";
import { openApiOf } from "@bridle/service-kit/testing";
import { loadStackConfig, up } from "@bridle/stack";
import { Client, Connection } from "@temporalio/client";
import { afterAll, describe, expect, inject, it } from "vitest";
import {
  componentState,
  config,
  gatewayHeaders,
  gatewayUrl,
  postJson,
  serviceUrls,
  waitFor,
} from "./helpers.ts";
import { testStackEnv } from "./stack-env.ts";

const connection = await Connection.connect({ address: `${config.host}:${config.ports.temporal}` });
const temporal = new Client({ connection, namespace: "bridle" });
afterAll(() => connection.close());

async function runProbe(prompt: string) {
  const started = await postJson(`${gatewayUrl}/v1/probes`, { prompt, maxTokens: 6 });
  expect(started.status).toBe(202);
  const res = await fetch(`${gatewayUrl}/v1/probes/${started.json.id}?wait=true`, {
    headers: gatewayHeaders,
  });
  return {
    id: started.json.id as string,
    uiUrl: started.json.uiUrl as string,
    view: ProbeView.parse(await res.json()),
  };
}

describe("the embedded stack", () => {
  it("came up from a stale supervisor pid file left by a killed supervisor", () => {
    const lines = inject("upLines");
    expect(lines).toContain("removing a stale supervisor pid file");
    expect(lines).toContain(
      `the gateway's API takes a bearer token, kept in ${join(config.home, "api-token")} (the CLI sends it itself)`,
    );
    expect(lines.at(-1)).toMatch(/worker\s+healthy/);
  });

  it("treats a second `up` as a no-op on the running stack", async () => {
    const before = await componentState("gateway");
    const lines: string[] = [];
    await up(config, (line) => lines.push(line));
    expect(lines[0]).toMatch(/already running/);
    expect((await componentState("gateway")).pid).toBe(before.pid);
  });

  it("names a port that another program holds instead of starting", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(27990, "127.0.0.1", resolve));
    try {
      const other = loadStackConfig({
        ...process.env,
        ...testStackEnv,
        BRIDLE_DATA: `${config.data}-conflict`,
        BRIDLE_TEMPORAL_PORT: "27990",
      });
      await expect(up(other)).rejects.toThrow(/port 27990 .*temporal.*BRIDLE_TEMPORAL_PORT/);
    } finally {
      holder.close();
    }
  });

  it("runs the probe workflow through gateway, Temporal, worker, serving and vLLM", async () => {
    const { id, uiUrl, view } = await runProbe("Name one colour.");
    expect(view.status).toBe("COMPLETED");
    expect(uiUrl).toContain(`/namespaces/bridle/workflows/${id}`);
    const { model, completion } = view.result!;
    expect(model.id).toBe(config.modelName);
    expect(completion.completionTokenIds.length).toBeGreaterThan(0);
    expect(completion.logprobs).toHaveLength(completion.completionTokenIds.length);
    expect(completion.promptTokenIds.length).toBeGreaterThan(0);

    // The history is in Temporal, readable by the UI, with the activities that did the work.
    const history = await temporal.workflow.getHandle(id).fetchHistory();
    const activities = (history.events ?? [])
      .map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name)
      .filter(Boolean);
    expect(activities).toEqual(["describeModel", "sampleCompletion"]);
    const description = await temporal.workflow.getHandle(id).describe();
    expect(await description.staticSummary()).toMatch(/Stack probe/);
  });

  it("keeps the gateway closed by default: no token, no run; the token file is its owner's alone", async () => {
    const open = await fetch(`${gatewayUrl}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "no-token" }),
    });
    expect(open.status).toBe(401);
    expect((await fetch(`${gatewayUrl}/v1/runs`)).status).toBe(401);
    expect((await fetch(`${gatewayUrl}/v1/runs`, { headers: gatewayHeaders })).status).toBe(200);
    expect(statSync(join(config.home, "api-token")).mode & 0o777).toBe(0o600);
  });

  it("serves an OpenAPI document from every service", async () => {
    const urls = serviceUrls();
    expect(Object.keys(urls)).toEqual(expect.arrayContaining(["gateway", "serving"]));
    for (const [name, origin] of Object.entries(urls)) {
      const res = await fetch(`${origin}/openapi.json`);
      expect(res.status, name).toBe(200);
      const doc = await openApiOf(res);
      expect(doc.openapi, name).toMatch(/^3\./);
      expect(Object.keys(doc.paths).length, name).toBeGreaterThan(0);
    }
  });

  it("restarts a service that dies, and the system works again", async () => {
    const before = await componentState("serving");
    process.kill(before.pid!, "SIGKILL");
    const after = await waitFor("serving to be restarted", async () => {
      const state = await componentState("serving");
      return state.restarts > before.restarts && state.status === "healthy" && state.healthy
        ? state
        : undefined;
    });
    expect(after.pid).not.toBe(before.pid);
    const { view } = await runProbe("Say yes.");
    expect(view.status).toBe("COMPLETED");
  });
});
