import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, truncateSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdapterVersion, CompletionResult } from "@bridle/contracts";
import { createLogger } from "@bridle/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inspectAdapter } from "./adapter-files.ts";
import { AdapterManager, type AdapterSettings } from "./adapters.ts";
import { createServingApp } from "./app.ts";
import { ModelPool } from "./pool.ts";
import { AdapterRegistry } from "./registry.ts";
import { makeAdapters, startVllm, type VllmProcess } from "./test-support.ts";
import { VllmClient } from "./vllm.ts";

// A real vLLM (CPU) on the embedded model, started as the stack starts it, with two adapter slots.
const VLLM_PORT = 19681;
const NAME = "smollm2/pi/run-a";
const root = mkdtempSync(join(tmpdir(), "bridle-serving-"));
const settings: AdapterSettings = {
  maxLoras: 2,
  maxLoraRank: 16,
  keepVersions: 2,
  monitorMs: 300,
  filesDir: join(root, "fetched"),
};
const log = createLogger("serving-test", "silent");
let vllmProcess: VllmProcess;
let vllm: VllmClient;
let registry: AdapterRegistry;
let manager: AdapterManager;
let app: ReturnType<typeof createServingApp>;
let random: string[];
let zero: string;
let strong: string;

const post = async (path: string, body: unknown) => {
  const response = await app.request(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};
/**
 * Submits a version and, once accepted (202), reads it when its load has ended: the submit's status
 * with the version's final record, or the refusal as it came.
 */
const loadVersion = async (path: string, step?: number, name = NAME) => {
  const submitted = await post(
    `/v1/adapters/${name}/versions`,
    step === undefined ? { path } : { path, step },
  );
  if (submitted.status !== 202) return submitted;
  const { version } = AdapterVersion.parse(submitted.body);
  const read = await app.request(`/v1/adapters/${name}/versions/${version}?wait=true`);
  return { status: submitted.status, body: (await read.json()) as Record<string, unknown> };
};
const complete = (model: string) =>
  post("/v1/completions", { model, prompt: "def add(a, b):", maxTokens: 6 });
const waitFor = async (ok: () => Promise<boolean>, ms = 120_000) => {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 250));
  }
};

beforeAll(async () => {
  random = makeAdapters(join(root, "random"), 3);
  [zero] = makeAdapters(join(root, "zero"), 1, { zero: true }) as [string];
  [strong] = makeAdapters(join(root, "strong"), 1, { std: 0.2, seed: 11 }) as [string];
  vllmProcess = await startVllm(VLLM_PORT, settings.maxLoras, root);
  vllm = new VllmClient(vllmProcess.url, 60_000);
  registry = new AdapterRegistry(join(root, "registry"));
  manager = new AdapterManager(registry, new ModelPool([vllm]), settings, log);
  manager.start();
  app = createServingApp({ log, pool: manager.pool, adapters: manager });
  await waitFor(async () => (await app.request("/v1/base-model")).ok);
});

afterAll(async () => {
  manager?.stop();
  registry?.close();
  await vllmProcess?.stop();
  rmSync(root, { recursive: true, force: true });
});

describe("adapter versions on a real vLLM", () => {
  it("loads a version under its versioned name, proves it with the canary, and stamps completions", async () => {
    const { status, body } = await loadVersion(random[0]!, 1);
    expect(status).toBe(202);
    const v1 = AdapterVersion.parse(body);
    expect(v1).toMatchObject({ servedName: `${NAME}@v1`, state: "serving", step: 1, error: null });
    expect(v1.canaryDelta).toBeGreaterThan(1e-4);

    const adapted = CompletionResult.parse((await complete(NAME)).body);
    const base = CompletionResult.parse((await complete(vllmProcess.modelName)).body);
    expect(adapted.adapter).toEqual({ name: NAME, version: 1, servedName: `${NAME}@v1`, hash: v1.hash });
    expect(base.adapter).toBeNull();
    expect(adapted.logprobs).not.toEqual(base.logprobs);
    expect(CompletionResult.parse((await complete(`${NAME}@v1`)).body).adapter?.version).toBe(1);
  });

  it("marks a load whose outputs equal the base model's as failed; the previous version keeps serving", async () => {
    const { status, body } = await loadVersion(zero);
    expect(status).toBe(202);
    expect(AdapterVersion.parse(body)).toMatchObject({
      state: "failed",
      error: { code: "canary_equals_base" },
    });
    expect(registry.get(NAME, 2)?.state).toBe("failed");
    expect(CompletionResult.parse((await complete(NAME)).body).adapter?.version).toBe(1);
    const loaded = (await vllm.baseModel()).adapters.map((a) => a.id);
    expect(loaded).toEqual([`${NAME}@v1`]); // the failed version was unloaded again
  });

  it("rejects a corrupted adapter directory with a clear error; the previous version keeps serving", async () => {
    const corrupt = join(root, "corrupt");
    cpSync(random[1]!, corrupt, { recursive: true });
    truncateSync(join(corrupt, "adapter_model.safetensors"), 1_000);
    const { status, body } = await loadVersion(corrupt);
    expect(status).toBe(422);
    expect(body.error).toMatchObject({
      code: "invalid_adapter",
      message: expect.stringMatching(/truncated or corrupt/),
    });
    expect((await loadVersion(join(root, "missing"))).status).toBe(422);
    expect(CompletionResult.parse((await complete(NAME)).body).adapter?.version).toBe(1);
  });

  it("loads a version by reference: fetched from its owner, checked against its hash", async () => {
    // A STAND-IN for the trainer's adapter route (GET /v1/steps/{run}/{step}/adapter/{file}): a
    // plain file server over one adapter folder. The real route is used end to end in test/.
    const owner = createServer((req, res) => {
      const file = (req.url ?? "").split("/").pop() ?? "";
      if (!["adapter_config.json", "adapter_model.safetensors"].includes(file))
        return res.writeHead(404).end();
      res.writeHead(200).end(readFileSync(join(random[1]!, file)));
    });
    await new Promise<void>((resolve) => owner.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(owner.address() as AddressInfo).port}/files`;
    const ref = "smollm2/pi/run-ref";
    const byRef = (source: { url: string; hash: string }, version: number) =>
      post(`/v1/adapters/${ref}/versions`, { source, step: version, version }).then(async (submitted) => {
        expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
        const read = await app.request(`/v1/adapters/${ref}/versions/${version}?wait=true`);
        return AdapterVersion.parse(await read.json());
      });
    try {
      const { hash } = inspectAdapter(random[1]!, settings.maxLoraRank);
      const other = inspectAdapter(random[2]!, settings.maxLoraRank).hash;
      const wrong = await byRef({ url, hash: other }, 1);
      expect(wrong).toMatchObject({ state: "failed", error: { code: "content_mismatch" } });
      const gone = await byRef({ url: "http://127.0.0.1:9/files", hash }, 2);
      expect(gone).toMatchObject({ state: "failed", error: { code: "source_unavailable" } });
      const v3 = await byRef({ url, hash }, 3);
      expect(v3).toMatchObject({ state: "serving", hash, path: join(settings.filesDir, hash) });
      expect(CompletionResult.parse((await complete(ref)).body).adapter).toMatchObject({ version: 3, hash });
      expect(
        (await post(`/v1/adapters/${ref}/versions`, { path: random[1]!, source: { url, hash } })).status,
      ).toBe(400);
      // Retired, the copy goes (the trainer keeps the original).
      expect((await app.request(`/v1/adapters/${ref}/versions/3`, { method: "DELETE" })).status).toBe(200);
      expect(existsSync(join(settings.filesDir, hash))).toBe(false);
    } finally {
      owner.close();
      await app.request(`/v1/adapters/${ref}/versions/3`, { method: "DELETE" });
    }
  });

  it("keeps versions within --max-loras by retention, and retires on request", async () => {
    const v3 = AdapterVersion.parse((await loadVersion(random[1]!, 3)).body);
    const v4 = AdapterVersion.parse((await loadVersion(random[2]!, 4)).body);
    expect([v3.version, v4.version]).toEqual([3, 4]);
    expect(registry.get(NAME, 1)?.state).toBe("retired");
    const loaded = (await vllm.baseModel()).adapters.map((a) => a.id).sort();
    expect(loaded).toEqual([`${NAME}@v3`, `${NAME}@v4`]);
    expect(CompletionResult.parse((await complete(NAME)).body).adapter?.version).toBe(4);
    expect((await complete(`${NAME}@v1`)).status).toBe(409); // retired versions are never silently replaced
    // The same content submitted again as its version (a retried submit) is that version.
    const again = await post(`/v1/adapters/${NAME}/versions`, { path: random[2]!, version: 4 });
    expect(again.status).toBe(200);
    expect(AdapterVersion.parse(again.body)).toMatchObject({ version: 4, state: "serving" });

    const retired = await app.request(`/v1/adapters/${NAME}/versions/3`, { method: "DELETE" });
    expect(AdapterVersion.parse(await retired.json()).state).toBe("retired");
    expect((await vllm.baseModel()).adapters.map((a) => a.id)).toEqual([`${NAME}@v4`]);
  });

  it("cancels a version still loading: it never serves, and the current version goes on", async () => {
    const submitted = await post(`/v1/adapters/${NAME}/versions`, { path: random[0]!, step: 5 });
    expect(submitted.status).toBe(202);
    expect(AdapterVersion.parse(submitted.body)).toMatchObject({ version: 5, state: "loading" });
    const cancelled = await app.request(`/v1/adapters/${NAME}/versions/5`, { method: "DELETE" });
    expect(AdapterVersion.parse(await cancelled.json())).toMatchObject({
      state: "retired",
      error: { code: "load_cancelled" },
    });
    expect((await vllm.baseModel()).adapters.map((a) => a.id)).toEqual([`${NAME}@v4`]);
    expect(CompletionResult.parse((await complete(NAME)).body).adapter?.version).toBe(4);
  });

  it("flags a version the live canary finds served as the base model, and unloads it; the others go on", async () => {
    const other = "smollm2/pi/run-e";
    const loaded = AdapterVersion.parse((await loadVersion(random[0]!, 1, other)).body);
    expect(loaded.state).toBe("serving");
    expect(await manager.liveCanary()).toEqual([]); // every version serving is what it claims
    // Behind serving's back, the name now holds weights equal to the base model's: what a stale
    // cache or a restart that reloaded the wrong files would leave.
    // (The monitor is held meanwhile, its last pass done: it would load the real weights into the gap.)
    manager.stop();
    await manager.check();
    await vllm.unloadLora(loaded.servedName);
    await vllm.loadLora(loaded.servedName, zero);
    const flagged = await manager.liveCanary();
    manager.start();
    expect(flagged.map((v) => [v.servedName, v.state, v.error?.code])).toEqual([
      [loaded.servedName, "failed", "served_as_base"],
    ]);
    expect(registry.get(other, 1)?.state).toBe("failed");
    expect((await vllm.baseModel()).adapters.map((a) => a.id)).toEqual([`${NAME}@v4`]);
    expect(CompletionResult.parse((await complete(NAME)).body).adapter?.version).toBe(4);
  });

  it("serves more current adapters than --max-loras: vLLM swaps them in per request", async () => {
    const others = ["smollm2/pi/run-b", "smollm2/pi/run-c"];
    for (const [i, name] of others.entries()) {
      const res = await loadVersion(random[i]!, 1, name);
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      expect(AdapterVersion.parse(res.body).state).toBe("serving");
    }
    expect(registry.inState("serving").length).toBeGreaterThan(settings.maxLoras);
    // Each answers as itself, in turn and again, so each is swapped out and back in at least once;
    // the second answer equals the first, so a slot that held another adapter serves the new one.
    const first = new Map<string, number[]>();
    for (const name of [NAME, ...others, NAME, ...others]) {
      const res = await complete(name);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const answer = CompletionResult.parse(res.body);
      expect(answer.adapter?.name).toBe(name);
      if (first.has(name)) expect(answer.logprobs).toEqual(first.get(name));
      else first.set(name, answer.logprobs);
    }
    expect(new Set([...first.values()].map((lp) => JSON.stringify(lp))).size).toBe(first.size);
    for (const name of others) {
      expect((await app.request(`/v1/adapters/${name}/versions/1`, { method: "DELETE" })).status).toBe(200);
    }
  });

  it("computes a base-model request batched with adapter requests with the base weights alone", async () => {
    // vLLM's own CPU LoRA ops index a slot per token, and a base token's -1 picks the last slot:
    // with every slot holding an adapter, the base arm of an evaluation sampled an adapter.
    // The adapter here moves the model far (B ~ N(0, 0.2)): its greedy tokens differ from the
    // first, and its logprobs by more than the serving precision's rounding.
    const other = "smollm2/pi/run-d";
    const loaded = await loadVersion(strong, 1, other);
    expect(AdapterVersion.parse(loaded.body).state, JSON.stringify(loaded.body)).toBe("serving");
    try {
      for (const name of [NAME, other]) expect((await complete(name)).status).toBe(200); // both slots in use
      const ask = (model: string) =>
        vllm.complete({ model, prompt: "def fibonacci(n):", maxTokens: 16, temperature: 0 });
      const base = vllmProcess.modelName;
      // Two batches of other shapes round differently: 2.4e-4 apart seen in float32 and 0.14 in
      // bfloat16, where a logit near 20 is rounded to steps of 0.125. An adapter slot leaking into
      // base tokens moves them by the adapter's own shift instead, and changes the greedy tokens.
      const rounding = vllmProcess.precision === "bf16" ? 0.5 : 1e-3;
      const gap = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - (b[i] ?? 0))));
      const [beside, alsoBase] = await Promise.all([ask(base), ask(base)]);
      expect(alsoBase.completionTokenIds).toEqual(beside.completionTokenIds); // two equal requests: one answer
      expect(gap(alsoBase.logprobs, beside.logprobs)).toBeLessThan(rounding);
      const [besideAdapter, adapter] = await Promise.all([ask(base), ask(`${other}@v1`)]);
      expect(adapter.completionTokenIds).not.toEqual(beside.completionTokenIds); // the adapter shows
      const shift = gap(adapter.logprobs, beside.logprobs);
      expect(shift).toBeGreaterThan(2 * rounding);
      expect(besideAdapter.completionTokenIds).toEqual(beside.completionTokenIds);
      expect(gap(besideAdapter.logprobs, beside.logprobs)).toBeLessThan(rounding);
    } finally {
      await app.request(`/v1/adapters/${other}/versions/1`, { method: "DELETE" });
    }
  });

  it("samples a seeded request whose prompt is prefilled in chunks as when it comes from the cache", async () => {
    // Over the CPU server's 2,048 tokens a step, a prompt is prefilled in chunks and each chunk's
    // sample thrown away; vLLM rewinds a seeded request's generator by an offset a CPU generator
    // lacks, and its engine died on the first harness whose system prompt passed the budget.
    const prompt = `${Array.from({ length: 1_200 }, (_, i) => `item${i}`).join(" ")}\nThe first item is`;
    const ask = (seed: number) =>
      vllm.complete({ model: vllmProcess.modelName, prompt, maxTokens: 12, temperature: 1, seed });
    const chunked = await ask(7);
    expect(chunked.promptTokenIds.length).toBeGreaterThan(2_048);
    const cached = await ask(7); // the prefix cache holds the prompt: one step, nothing thrown away
    // The same seed draws the same tokens while the two prefill paths' logits agree; they differ in
    // floating point (other matrix shapes), so a temperature-1 sample may part later on (here at
    // the 11th of 12 tokens); a generator rewound by a wrong offset draws other numbers from the first.
    expect(cached.completionTokenIds.slice(0, 4)).toEqual(chunked.completionTokenIds.slice(0, 4));
    const otherSeed = await ask(8);
    expect(otherSeed.completionTokenIds).not.toEqual(chunked.completionTokenIds);
  });

  it("refuses names that are not <model>/<harness>/<run> and unknown adapters", async () => {
    expect((await post("/v1/adapters/a/b/c%20d/versions", { path: random[0] })).status).toBe(400);
    expect((await post("/v1/adapters/a/b/c/versions", { path: "" })).status).toBe(400);
    expect((await complete("nobody/pi/none")).status).toBe(404);
  });

  it("reloads serving versions after vLLM restarts; callers get retryable 503s meanwhile", async () => {
    const before = CompletionResult.parse((await complete(NAME)).body);
    await vllmProcess.stop();
    const during = await complete(NAME);
    expect(during.status).toBe(503);
    expect(during.body.error).toMatchObject({ retryable: true });

    vllmProcess = await startVllm(VLLM_PORT, settings.maxLoras, root);
    await waitFor(async () => (await complete(NAME)).status === 200);
    const after = CompletionResult.parse((await complete(NAME)).body);
    expect(after.adapter).toEqual(before.adapter);
    expect(after.completionTokenIds).toEqual(before.completionTokenIds);
    expect((await vllm.baseModel()).adapters.map((a) => a.id)).toEqual([`${NAME}@v4`]);
  });

  it("keeps the registry across a restart of the service", async () => {
    manager.stop();
    registry.close();
    registry = new AdapterRegistry(join(root, "registry"));
    manager = new AdapterManager(registry, new ModelPool([vllm]), settings, log);
    manager.start();
    app = createServingApp({ log, pool: manager.pool, adapters: manager });
    expect(registry.versions(NAME).map((v) => [v.version, v.state])).toEqual([
      [1, "retired"],
      [2, "failed"],
      [3, "retired"],
      [4, "serving"],
      [5, "retired"],
    ]);
    await waitFor(async () => (await complete(NAME)).status === 200);
    expect(CompletionResult.parse((await complete(NAME)).body).adapter?.version).toBe(4);
  });
});
