import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { config, postJson } from "./helpers.ts";

const vllm = config.vllmUrl;
const python = join(config.venv, "bin", "python");
const work = mkdtempSync(join(tmpdir(), "bridle-lora-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const chat = (model: string) =>
  postJson(`${vllm}/v1/chat/completions`, {
    model,
    messages: [{ role: "user", content: "Write the word hello." }],
    max_tokens: 6,
    temperature: 0,
    logprobs: true,
    return_token_ids: true,
  });

describe("vLLM (CPU build) serving the embedded model", () => {
  it("answers a chat completion with token ids and logprobs", async () => {
    const { status, json } = await chat(config.modelName);
    expect(status).toBe(200);
    const choice = json.choices[0];
    expect(json.prompt_token_ids.length).toBeGreaterThan(5);
    expect(choice.token_ids.length).toBeGreaterThan(0);
    expect(choice.logprobs.content).toHaveLength(choice.token_ids.length);
    for (const entry of choice.logprobs.content) expect(entry.logprob).toBeLessThanOrEqual(0);
  });

  it("loads a PEFT LoRA adapter at runtime, answers differently with it, and unloads it", async () => {
    const adapter = join(work, "random-lora");
    const script = fileURLToPath(new URL("../fixtures/random_lora.py", import.meta.url));
    const made = spawnSync(python, [script, config.modelDir, adapter, "8"], { encoding: "utf8" });
    expect(made.status, made.stderr).toBe(0);

    const load = await postJson(`${vllm}/v1/load_lora_adapter`, {
      lora_name: "e2e-random@v1",
      lora_path: adapter,
    });
    expect(load.status, String(load.json)).toBe(200);
    const models = (await (await fetch(`${vllm}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m: { id: string }) => m.id)).toContain("e2e-random@v1");

    const base = await chat(config.modelName);
    const tuned = await chat("e2e-random@v1");
    expect(tuned.status).toBe(200);
    const logprobs = (r: typeof base) =>
      r.json.choices[0].logprobs.content.map((c: { logprob: number }) => c.logprob);
    const tokens = (r: typeof base) => r.json.choices[0].token_ids;
    expect({ tokens: tokens(tuned), logprobs: logprobs(tuned) }).not.toEqual({
      tokens: tokens(base),
      logprobs: logprobs(base),
    });

    const unload = await postJson(`${vllm}/v1/unload_lora_adapter`, { lora_name: "e2e-random@v1" });
    expect(unload.status).toBe(200);
    const gone = await chat("e2e-random@v1");
    expect(gone.status).toBe(404);
  });
});
