import { existsSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { callJson } from "@bridle/service-kit";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { config, ensureBundledTasks, gatewayHeaders, gatewayUrl, postJson, waitFor } from "./helpers.ts";

/** The system's Chromium (Debian's package, which `./bridle test` installs), driven headless. */
const CHROMIUM = process.env.BRIDLE_CHROMIUM ?? "/usr/bin/chromium";
/** Where the screenshot is left to look at (ignored by git). */
const artifacts = fileURLToPath(new URL("../artifacts/", import.meta.url));
const limits = { agentTimeoutSec: 150, maxTurns: 2, contextWindow: 8192, concurrency: 2 };

let browser: Browser;
beforeAll(async () => {
  expect(await ensureBundledTasks()).toBeGreaterThan(20);
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM}: ./bridle test installs Debian's chromium`);
  // As root (CI), Chromium's own sandbox cannot start; the page is the gateway's own, on loopback.
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
}, 900_000);
afterAll(() => browser?.close());

const jobStatus = (path: string) =>
  callJson(`${gatewayUrl}/v1/${path}`, { schema: z.object({ status: z.string() }), headers: gatewayHeaders });

describe("the dashboard, in a real headless Chromium", () => {
  it("shows a run's curves gaining points while it trains, an evaluation's interval, and the adapters", async () => {
    const run = await postJson(`${gatewayUrl}/v1/runs`, {
      name: "e2e-dashboard",
      steps: 2,
      batchSize: 1,
      groupSize: 2,
      categories: ["repair"],
      ...limits,
    });
    expect(run.status).toBe(202);
    const evaluation = await postJson(`${gatewayUrl}/v1/evals`, {
      id: "e2e-dashboard-eval",
      candidate: config.modelName,
      baseline: config.modelName,
      limit: 1,
      ...limits,
    });
    expect(evaluation.status).toBe(202);

    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const errors: string[] = [];
    page.on("pageerror", (err) => errors.push(err.message));
    page.on("console", (message) => {
      if (message.type() === "error") errors.push(message.text());
    });
    await page.goto(`${gatewayUrl}/ui/#token=${encodeURIComponent(config.apiToken)}`);
    // The token leaves the address at once; the page keeps it for the tab.
    expect(page.url()).not.toContain(config.apiToken);
    await page.click('tr[data-run="e2e-dashboard"]', { timeout: 30_000 });

    // Step 1's point arrives while the run is still training step 2; then step 2's joins it.
    const reward = page.locator('[data-chart="reward"]');
    const pointsNow = () => reward.getAttribute("data-points");
    await expect.poll(pointsNow, { timeout: 900_000, interval: 1_000 }).toBe("1");
    expect(await page.textContent('[data-fact="status"]')).toBe("RUNNING");
    expect(await page.locator('[data-chart="reward"] canvas').count()).toBe(1); // uPlot drew it
    await expect.poll(pointsNow, { timeout: 900_000, interval: 1_000 }).toBe("2");
    for (const chart of ["calls", "loss", "kl"])
      expect(await page.locator(`[data-chart="${chart}"]`).getAttribute("data-points")).toBe("2");
    await expect.poll(() => page.textContent('[data-fact="status"]'), { timeout: 120_000 }).toBe("COMPLETED");

    // The evaluation's report, with the paired difference's interval drawn.
    await waitFor(
      "the evaluation to end",
      async () => ((await jobStatus("evals/e2e-dashboard-eval")).status === "RUNNING" ? undefined : true),
      900_000,
    );
    expect((await jobStatus("evals/e2e-dashboard-eval")).status).toBe("COMPLETED");
    await page.click('tr[data-eval="e2e-dashboard-eval"]');
    await page.waitForSelector('[data-ci="overall"] svg circle', { timeout: 30_000 });
    expect(await page.textContent('[data-ci="overall"]')).toMatch(/pts \[/);
    // The promotion gate's verdict: one task of a model against itself bounds nothing, so it keeps.
    expect(await page.getAttribute("[data-verdict]", "data-verdict")).toBe("keep");

    // The adapters table lists what serving lists.
    const adapters = await callJson(`${gatewayUrl}/v1/adapters`, {
      schema: z.object({ adapters: z.array(z.object({ versions: z.array(z.unknown()) })) }),
      headers: gatewayHeaders,
    });
    const versions = adapters.adapters.reduce((n, a) => n + a.versions.length, 0);
    await expect
      .poll(() => page.locator("#adapters tbody tr[data-adapter]").count(), { timeout: 30_000 })
      .toBe(versions);

    mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: `${artifacts}dashboard.png`, fullPage: true });
    expect(errors).toEqual([]);
  }, 1_800_000);
});
