import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { basename } from "node:path";
import { fileURLToPath } from "node:url";
import { LineageView, TrainStepView } from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";
import { Client, Connection } from "@temporalio/client";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  config,
  ensureBundledTasks,
  FIXTURE,
  gatewayUrl,
  importFixtureTasks,
  postJson,
  runView,
  servingUrl,
  waitFor,
} from "./helpers.ts";

/**
 * A lineage on the real stack: a run's version promoted by hand (a promotion workflow), a second
 * run that starts from it (the trainer restores its weights, serving records the parent, every
 * sample proven served by the promoted version), then a rollback by hand, shown on the dashboard.
 *
 * The runs train on the random-credit fixture (`FIXTURE` in helpers.ts: its verifier is a TEST
 * DOUBLE for partial credit; on real tasks the small CPU model trains no step, so no version would
 * exist to promote). Promotion and rollback decided by
 * an evaluation's verdict are tested on a real Temporal server in workflows/src/lineage.test.ts.
 */
const repo = fileURLToPath(new URL("../..", import.meta.url));
const artifacts = fileURLToPath(new URL("../artifacts/", import.meta.url));
const CHROMIUM = process.env.BRIDLE_CHROMIUM ?? "/usr/bin/chromium";
const model = config.modelName;
const lineageUrl = `${servingUrl}/v1/lineages/${model}/pi`;

let temporal: Client;
let connection: Connection;
beforeAll(async () => {
  expect(await ensureBundledTasks()).toBeGreaterThan(20);
  await importFixtureTasks();
  connection = await Connection.connect({ address: `${config.host}:${config.ports.temporal}` });
  temporal = new Client({ connection, namespace: "bridle" });
}, 900_000);
afterAll(() => connection?.close());

const cli = (...args: string[]) =>
  spawnSync(process.execPath, ["--import", "tsx", `${repo}/infra/cli/src/main.ts`, ...args], {
    encoding: "utf8",
    env: process.env,
    timeout: 600_000,
  });

async function trainOneStep(name: string, start: "fresh" | "promoted") {
  const started = await postJson(`${gatewayUrl}/v1/runs`, {
    name,
    start,
    steps: 1,
    batchSize: 1,
    groupSize: 2,
    tasks: [FIXTURE],
    agentTimeoutSec: 150,
    maxTurns: 1,
    contextWindow: 8192,
    concurrency: 2,
  });
  expect(started.status, JSON.stringify(started.json)).toBe(202);
  const done = await waitFor(
    `run ${name} to finish`,
    async () => {
      const view = await runView(name);
      return view.status !== "RUNNING" ? view : undefined;
    },
    1_200_000,
  );
  expect(done.status, done.failure ?? "").toBe("COMPLETED");
  expect(done.progress!.metrics[0]).toMatchObject({ applied: true, adapterVersion: 1, refusedSamples: 0 });
  return done.progress!;
}

describe("an adapter lineage on the real stack", () => {
  it("continues from the promoted version, records parents, and rolls back, shown on the dashboard", async () => {
    // Nothing promoted yet: a run that would continue the lineage is refused in the answer.
    const refused = await postJson(`${gatewayUrl}/v1/runs`, { name: "e2e-lineage-none", start: "promoted" });
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe("nothing_promoted");

    const first = await trainOneStep("e2e-lineage-a", "fresh");
    const promoted = `${first.adapter}@v1`;
    const promote = cli("adapters", "promote", promoted, "--reason", "the e2e lineage test promotes it");
    expect(promote.status, promote.stderr).toBe(0);
    expect(promote.stdout).toContain(`promoted ${promoted} (was the base model)`);
    // Serving's refusals come back through the workflow and the gateway, named.
    const again = cli("adapters", "promote", promoted, "--reason", "twice");
    expect(again.status).toBe(1);
    expect(again.stderr).toContain(`${promoted} is already the promoted version`);
    const unknown = cli("adapters", "promote", `${first.adapter}@v9`, "--reason", "no such version");
    expect(unknown.stderr).toContain(`no version ${first.adapter}@v9`);

    const second = await trainOneStep("e2e-lineage-b", "promoted");
    expect(second.parent).toMatchObject({ servedName: promoted, step: { run: "e2e-lineage-a", step: 1 } });
    // The trainer started from the promoted step's weights (checked by hash) on the same base model.
    const step = await callJson(`http://${config.host}:${config.ports.trainer}/v1/steps/e2e-lineage-b/1`, {
      schema: TrainStepView,
    });
    expect(step.state).toBe("done");
    if (step.state !== "done") return;
    expect(step.result.parent).toEqual(second.parent!.step);
    expect(step.result.baseModel).toBe(basename(config.modelDir));
    // Serving records each version's parent: b@v1 grew from a@v1.
    const lineage = await callJson(lineageUrl, { schema: LineageView });
    const b = lineage.adapters.find((a) => a.name === second.adapter)!;
    expect(b.versions[0]!.parent).toEqual({ name: first.adapter, version: 1 });

    const rollback = cli(
      "adapters",
      "rollback",
      `${model}/pi`,
      "--reason",
      "the e2e lineage test rolls it back",
    );
    expect(rollback.status, rollback.stderr).toBe(0);
    expect(rollback.stdout).toContain(`rolled ${promoted} back; now promoted: the base model`);
    const after = await callJson(lineageUrl, { schema: LineageView });
    expect(after.promoted).toBeNull();
    expect(after.decisions.slice(-2).map((d) => d.action)).toEqual(["promote", "rollback"]);
    const listed = cli("adapters");
    expect(listed.stdout).toContain(`${model} in pi: promoted nothing`);
    expect(listed.stdout).toMatch(/rolled back to the base model \(was .*e2e-lineage-a@v1; by hand\)/);

    // Each decision is a workflow, found by its search attributes, the refused ones failed.
    const count = async (kind: string, status: string) => {
      let n = 0;
      for await (const _ of temporal.workflow.list({
        query: `BridleKind = "${kind}" AND BridleRun = "e2e-lineage-a" AND ExecutionStatus = "${status}"`,
      }))
        n++;
      return n;
    };
    // Visibility is eventually consistent: asked until it has them all.
    for (const [kind, status, n] of [
      ["promotion", "Completed", 1],
      ["promotion", "Failed", 2],
      ["rollback", "Completed", 1],
    ] as const)
      await waitFor(
        `${n} ${status} ${kind} workflow(s) in Temporal's visibility`,
        async () => ((await count(kind, status)) === n ? true : undefined),
        30_000,
      );

    // The dashboard shows the lineage, its rollback and each version's parent.
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
      await page.goto(`${gatewayUrl}/ui/#token=${encodeURIComponent(config.apiToken)}`);
      const shown = page.locator(`[data-lineage="${model}/pi"]`);
      await shown.locator('li[data-decision="rollback"]').waitFor({ timeout: 30_000 });
      expect(await shown.locator("h3").textContent()).toContain("nothing promoted");
      // Each decision links to its workflow in the Temporal UI.
      expect(await shown.locator('li[data-decision="rollback"] a').getAttribute("href")).toMatch(
        /\/namespaces\/bridle\/workflows\/rollback-by-hand-/,
      );
      expect(await page.textContent(`tr[data-adapter="${second.adapter}@v1"]`)).toContain(promoted);
      mkdirSync(artifacts, { recursive: true });
      await page.screenshot({ path: `${artifacts}lineage.png`, fullPage: true });
    } finally {
      await browser.close();
    }
  }, 1_800_000);
});
