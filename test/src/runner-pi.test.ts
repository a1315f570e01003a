import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { RolloutResult, Trajectory } from "@bridle/contracts";
import { describe, expect, it } from "vitest";
import { config, guardAdminHeaders, postJson } from "./helpers.ts";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const url = (port: number) => `http://${config.host}:${port}`;
const TASK = "repair-slugify-visible-test";

describe("pi against the real embedded model on vLLM, through the real guard, runner and sandbox", () => {
  it("ends with a well-formed result and a trajectory carrying token ids and logprobs", async () => {
    // The stack's tasks service starts empty: import the bundled task first.
    const imported = await postJson(`${url(config.ports.tasks)}/v1/tasks/import`, {
      path: join(repo, "tasks", TASK),
    });
    expect(imported.status, JSON.stringify(imported.json)).toBe(200);

    const res = await postJson(`${url(config.ports.runner)}/v1/rollouts`, {
      rolloutId: `e2e-pi-${Date.now()}`,
      taskId: TASK,
      harness: "pi",
      model: config.modelName,
      // vLLM serves 8192 tokens; pi's system prompt and tools take about a third of that.
      contextWindow: 8192,
      maxTurns: 3,
      agentTimeoutSec: 180,
    });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    const result = RolloutResult.parse(res.json);
    expect(result.harness).toBe("pi");
    if (process.env.DEBUG_ROLLOUT) console.log(JSON.stringify(result));
    // Whatever the small model does, the rollout is either scored or an environment failure.
    if (result.environmentFailure) {
      expect(result.correctness).toBeNull();
      expect(result.reward).toBeNull();
    } else {
      expect(result.correctness).toBeGreaterThanOrEqual(0);
      expect(result.correctness).toBeLessThanOrEqual(1);
      expect(result.reward).not.toBeNull();
    }
    expect(result.servedModels).toContain(config.modelName);

    const trajectoryUrl = `${url(config.ports.guard)}/admin/sessions/${result.refs.guardSession}/trajectory`;
    // The guard's admin API is closed without the stack's admin token.
    expect((await fetch(trajectoryUrl)).status).toBe(401);
    const traj = await fetch(trajectoryUrl, { headers: guardAdminHeaders });
    expect(traj.status).toBe(200);
    const trajectory = Trajectory.parse(await traj.json());
    expect(trajectory.toolCalls).toBe(result.toolCalls.guard);
    // A call the agent timeout cut short is recorded too, with the tokens it got so far (a call cut
    // before its first token has none, so the check is on the calls that produced some).
    const generated = trajectory.records.filter((r) => (r.completionTokenIds?.length ?? 0) > 0);
    expect(generated.length).toBeGreaterThan(0);
    for (const record of generated) {
      expect(record.servedModel).toBe(config.modelName);
      // The proof of what served it comes from serving's registry, not the echo above.
      expect(record.servedBy).toEqual({ model: config.modelName, adapter: null, version: null, hash: null });
      expect(record.promptTokenIds?.length).toBeGreaterThan(1_000); // pi's prompt alone
      expect(record.logprobs).toHaveLength(record.completionTokenIds!.length);
      for (const logprob of record.logprobs!) expect(logprob).toBeLessThanOrEqual(0);
    }
  }, 400_000);
});
