import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { StepMetrics } from "@bridle/contracts";
import { createApp, createLogger } from "@bridle/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunMetrics } from "./metrics.ts";
import { metricsRoutes } from "./routes/metrics.ts";

let dir: string;
let app: ReturnType<typeof createApp>;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-trainer-metrics-"));
  app = createApp({ name: "trainer", log: createLogger("trainer", "silent") });
  app.route("/v1", metricsRoutes(new RunMetrics(dir)));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const step = (n: number, meanReward: number) =>
  StepMetrics.parse({
    step: n,
    rollouts: 4,
    environmentFailures: 0,
    resampled: 0,
    meanReward,
    successRate: meanReward,
    meanToolCalls: 3,
    blocked: 0,
    applied: true,
    loss: 0.1,
    adapterVersion: n,
    adapterHash: `h${n}`,
    evalScore: null,
    finishedAt: "2026-12-05T00:00:00.000Z",
    categories: { repair: { rollouts: 4, successRate: meanReward, meanReward } },
  });
const put = (run: string, n: number, body: unknown) =>
  app.request(`/v1/runs/${run}/metrics/${n}`, {
    method: "PUT",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });

describe("a run's figures, kept whole by the trainer", () => {
  it("keeps every step in order, however many, and a step recorded again replaces it", async () => {
    for (let n = 30; n >= 1; n--) expect((await put("long-run", n, step(n, n / 100))).status).toBe(204);
    expect((await put("long-run", 7, step(7, 0.99))).status).toBe(204); // a retried activity
    const answer = await app.request("/v1/runs/long-run/metrics");
    const { metrics } = (await answer.json()) as { metrics: StepMetrics[] };
    expect(metrics.map((m) => m.step)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    expect(metrics[6]!.meanReward).toBe(0.99);
    expect(metrics[29]!.categories).toEqual({ repair: { rollouts: 4, successRate: 0.3, meanReward: 0.3 } });
  });

  it("answers none for a run that recorded none, and refuses figures of another step or a bad run name", async () => {
    expect(await (await app.request("/v1/runs/never/metrics")).json()).toEqual({ run: "never", metrics: [] });
    const other = await put("long-run", 3, step(4, 0.5));
    expect(other.status).toBe(400);
    expect(await other.json()).toMatchObject({ error: { code: "step_mismatch" } });
    expect((await put("long-run", 3, { step: 3 })).status).toBe(400);
    expect((await app.request("/v1/runs/..%2Fetc/metrics")).status).toBe(400);
    // Stray files in the run's folder are not steps.
    await writeFile(join(dir, "runs", "long-run", "metrics", "notes.txt"), "x");
    const { metrics } = (await (await app.request("/v1/runs/long-run/metrics")).json()) as {
      metrics: unknown[];
    };
    expect(metrics).toHaveLength(30);
  });
});
