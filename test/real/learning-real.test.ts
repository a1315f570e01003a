import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  CompletionResult,
  RolloutResult,
  RunProgress,
  ScoreResult,
  Trajectory,
  WorkflowStatus,
} from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";
import { down, loadStackConfig, type StackConfig, up } from "@bridle/stack";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { config as sharedStack, sleep } from "../src/helpers.ts";

/**
 * The embedded default model, Qwen2.5-Coder-0.5B, really learning from real rollouts of a real
 * bundled task: the rest of the suite checks structure on the smallest model, this file brings up
 * a second stack of its own with the real one (its own ports and data folder).
 */
const stack: StackConfig = loadStackConfig({
  ...process.env,
  BRIDLE_MODEL: "qwen2.5-coder-0.5b",
  BRIDLE_MODEL_NAME: undefined,
  BRIDLE_DATA: join(sharedStack.data, "..", `${sharedStack.data.split("/").at(-1)}-qwen`),
  BRIDLE_PORT_BASE: "29700",
  BRIDLE_TEMPORAL_PORT: "29233",
  BRIDLE_TEMPORAL_UI_PORT: "30233",
  BRIDLE_VLLM_PORT: "29000",
  BRIDLE_MAX_TOKENS: "256",
  // Four short sessions need far less than the default 2 GiB of KV cache, and two stacks share the
  // machine's memory here.
  BRIDLE_VLLM_KV_GIB: "1",
});
const url = (port: number) => `http://${stack.host}:${port}`;
const gatewayHeaders = { authorization: `Bearer ${stack.apiToken}` };
const RunView = z.object({
  status: WorkflowStatus,
  progress: RunProgress.nullable(),
  failure: z.string().nullable(),
});
const TASK = "build-hello-file";

beforeAll(async () => {
  await down(stack); // a stack left over from an interrupted run
  rmSync(stack.data, { recursive: true, force: true });
  await up(stack, (line) => process.stdout.write(`[qwen stack] ${line}\n`));
  const imported = await callJson(`${url(stack.ports.tasks)}/v1/tasks/import`, {
    schema: z.object({ verdicts: z.array(z.object({ ok: z.boolean() })) }),
    body: { path: join(new URL("../..", import.meta.url).pathname, "tasks", TASK) },
    timeoutMs: 120_000,
  });
  expect(imported.verdicts).toEqual([expect.objectContaining({ ok: true })]);
}, 600_000);

afterAll(async () => {
  const { leftovers } = await down(stack, (line) => process.stdout.write(`[qwen stack] ${line}\n`));
  // Nothing of this stack may outlive its down (the suite's own stack is checked the same way).
  expect(leftovers.map((l) => `${l.pid} ${l.command}`)).toEqual([]);
}, 120_000);

/** The LoRA B matrices of a PEFT adapter file: all zero when the adapter equals its base model. */
function loraBNorm(file: string): number {
  const bytes = readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8")) as Record<
    string,
    { dtype: string; data_offsets: [number, number] }
  >;
  let sum = 0;
  for (const [name, t] of Object.entries(header)) {
    if (!name.includes("lora_B") || t.dtype !== "F32") continue;
    const data = bytes.subarray(8 + headerLength + t.data_offsets[0], 8 + headerLength + t.data_offsets[1]);
    for (let i = 0; i < data.length; i += 4) sum += Math.abs(data.readFloatLE(i));
  }
  return sum;
}

describe("the embedded 0.5B learns from its own rollouts of a real bundled task", () => {
  it("rewards differ within a group, a GRPO step changes the adapter, and what it serves changes", async () => {
    const name = "qwen-learns";
    await callJson(`${url(stack.ports.gateway)}/v1/runs`, {
      schema: z.unknown(),
      headers: gatewayHeaders,
      body: {
        name,
        baseModel: stack.modelName,
        steps: 2,
        batchSize: 1,
        groupSize: 4,
        concurrency: 4,
        tasks: [TASK],
        maxTurns: 3,
        agentTimeoutSec: 300,
        seed: 3,
        // Two stacks share the machine here (the suite's and this one): micro-batches of 512 tokens
        // keep the trainer's memory small enough beside two model servers.
        train: { learningRate: 1e-4, seed: 3, microBatchTokens: 512 },
      },
    });
    // Two cores run four harnesses and the model server: a view can be slow to come; a few
    // unanswered polls in a row are load, not a failure.
    const view = () =>
      callJson(`${url(stack.ports.gateway)}/v1/runs/${name}`, { schema: RunView, headers: gatewayHeaders });
    let run = await view();
    for (let i = 0, missed = 0; run.status === "RUNNING" && i < 1_200; i++) {
      await sleep(2_000);
      try {
        run = await view();
        missed = 0;
      } catch (err) {
        if (++missed >= 5) throw err;
      }
    }
    expect(run.status, `run ${run.status}: ${run.failure ?? "no failure recorded"}`).toBe("COMPLETED");
    const metrics = run.progress!.metrics;
    console.info({ metrics }, "qwen training steps");
    // The model really calls tools and solves the task some of the time: a learning signal exists.
    expect(metrics.some((m) => (m.meanToolCalls ?? 0) > 0)).toBe(true);
    expect(metrics.some((m) => (m.meanReward ?? 0) > 0)).toBe(true);
    const step = metrics.find((m) => m.applied);
    expect(step, "no step had rewards that differed within its group").toBeDefined();
    expect(step!.tokensTrained).toBeGreaterThan(0);
    expect(step!.logprobDiff).toBeLessThan(0.1); // the trainer scores what vLLM sampled, at its temperature
    expect(Object.keys(step!.toolCallFormats).length).toBeGreaterThan(0);
    // Multi-call conversations were stitched, and the step says how: with Qwen's template the next
    // prompt re-renders a fenced JSON call in <tool_call> tags, so its calls join by messages.
    const stitched = metrics.map((m) => m.stitching);
    console.info({ stitched }, "calls by how they joined their conversation");
    expect(stitched.some((s) => (s["token-ids"] ?? 0) + (s.messages ?? 0) > 0)).toBe(true);
    for (const s of stitched)
      expect(Object.keys(s).every((k) => ["token-ids", "messages", "new-branch"].includes(k))).toBe(true);

    // The adapter's weights moved off their zero initialisation.
    const stepDir = join(stack.data, "trainer", "runs", name, "steps", String(step!.step).padStart(8, "0"));
    const adapterFile = join(stepDir, "adapter", "adapter_model.safetensors");
    expect(loraBNorm(adapterFile)).toBeGreaterThan(0);

    // What the served version answers differs from the base model on the same tokens.
    const served = `${stack.modelName}/pi/${name}@v${step!.adapterVersion}`;
    const serving = url(stack.ports.serving);
    const sample = await callJson(`${serving}/v1/completions`, {
      schema: CompletionResult,
      body: { prompt: "Create hello.txt containing Hello, world!", maxTokens: 24, temperature: 0, seed: 1 },
    });
    const score = (model: string) =>
      callJson(`${serving}/v1/score`, {
        schema: ScoreResult,
        body: { model, promptTokenIds: sample.promptTokenIds, completionTokenIds: sample.completionTokenIds },
      });
    const [base, tuned] = [await score(stack.modelName), await score(served)];
    expect(tuned.adapter).toMatchObject({ servedName: served, hash: step!.adapterHash });
    console.info({ base: base.sum, tuned: tuned.sum }, "served logprob of one completion");
    expect(Math.abs(tuned.sum - base.sum)).toBeGreaterThan(1e-3);
  }, 1_800_000);
});

/**
 * OpenCode, Hermes and Claude Code on the real model: their own system prompts and tools (7.2K,
 * 12.9K and 18.7K tokens with Qwen's template) are computed on 2 fp32 cores for 1.3, 3.2 and about
 * 6.5 minutes before the first token (measured: whole rollouts of 120, 224 and 400 s), so each
 * harness runs one short rollout (two model calls), one after the other; later calls reuse the
 * cached prefix (9 to 38 s). pi's real rollouts are the training run above.
 */
describe.each(["opencode", "hermes", "claude-code"])("%s on the embedded 0.5B", (harness) => {
  it("ends in a well-formed result whose trajectory carries token ids and logprobs, its calls counted alike by harness and guard", async () => {
    const started = Date.now();
    const result = await callJson(`${url(stack.ports.runner)}/v1/rollouts`, {
      schema: RolloutResult,
      body: {
        rolloutId: `real-${harness}`,
        taskId: TASK,
        harness,
        model: stack.modelName,
        maxTurns: 2,
        agentTimeoutSec: 1_200,
        temperature: 0.7,
        seed: 1,
      },
      timeoutMs: 1_500_000,
    });
    const trajectory = await callJson(
      `${url(stack.ports.guard)}/admin/sessions/${encodeURIComponent(result.refs.guardSession!)}/trajectory`,
      { schema: Trajectory, headers: { authorization: `Bearer ${stack.guardAdminToken}` } },
    );
    const main = trajectory.records.filter((r) => trajectory.mainBranch.includes(r.seq));
    console.info(
      {
        harness,
        seconds: Math.round((Date.now() - started) / 1000),
        correctness: result.correctness,
        stopReason: result.stopReason,
        toolCalls: result.toolCalls,
        stitching: result.stitching,
        calls: trajectory.records.map((r) => ({
          seq: r.seq,
          ms: r.durationMs,
          promptTokens: r.usage?.promptTokens,
          completionTokens: r.usage?.completionTokens,
          tools: r.toolCalls.map((c) => c.name),
          error: r.error,
        })),
      },
      "a real-model rollout",
    );
    // Well-formed: the harness ran to its end and the verifier scored it, whatever the model did.
    expect(result.environmentFailure, JSON.stringify(result.environmentFailure)).toBeNull();
    expect(result.correctness).not.toBeNull();
    expect(result.toolCalls.harness).toBe(result.toolCalls.guard);
    // Every model call of the main branch is trainable: its tokens as the model server saw them.
    expect(main.length).toBeGreaterThan(0);
    for (const call of main) {
      expect(call.promptTokenIds?.length).toBe(call.usage?.promptTokens);
      expect(call.completionTokenIds?.length).toBeGreaterThan(0);
      expect(call.logprobs?.length).toBe(call.completionTokenIds?.length);
    }
    // How each call joined its conversation, with the real tokenizer: the first opens the main
    // branch, each later call on it extends it by token ids or by messages, and any other branch
    // (a retry, a side request) is a new branch of its own.
    const { stitches } = trajectory;
    expect(stitches["token-ids"] + stitches.messages + stitches["new-branch"]).toBe(
      trajectory.records.length,
    );
    expect(stitches["new-branch"]).toBe(trajectory.abandoned.length + 1);
    expect(result.stitching["new-branch"]).toBe(trajectory.stitches["new-branch"]);
  }, 1_600_000);
});
