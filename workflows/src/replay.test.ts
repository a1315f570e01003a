import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "@temporalio/worker";
import { describe, expect, it } from "vitest";

const dir = fileURLToPath(new URL("../histories", import.meta.url));
const workflowsPath = fileURLToPath(new URL("./workflows/index.ts", import.meta.url));
const histories = readdirSync(dir).filter((f) => f.endsWith(".json"));

/**
 * Saved histories, replayed against today's workflow code: a change that would break a running
 * workflow (a non-deterministic edit without `patched()`) fails here, before it ships. They are of
 * real runs on the stack (`<type>.json`), and of the lineage scenario of lineage.test.ts on a real
 * Temporal server with its scripted activities (`<type>.<workflow id>.json`: replayed under that
 * id, which the ids of their child workflows derive from).
 */
describe("workflow histories replay against the current code", () => {
  it("has a saved history of every workflow type", () => {
    const types = histories.map((f) => f.split(".")[0]);
    expect(new Set(types)).toEqual(
      new Set(["evaluation", "probeStack", "promotion", "rollback", "trainingRun"]),
    );
  });

  it.each(histories)(
    "%s",
    async (file) => {
      const history = JSON.parse(readFileSync(`${dir}/${file}`, "utf8"));
      const workflowId = file.split(".").slice(1, -1).join(".") || file;
      await Worker.runReplayHistory({ workflowsPath }, history, workflowId);
    },
    120_000,
  );
});
