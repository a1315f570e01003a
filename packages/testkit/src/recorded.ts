import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";

/**
 * Trajectories recorded by the guard on real rollouts (not test doubles: real harness, real model
 * server, real tokenizer), kept as the guard served them, gzipped, under `fixtures/`:
 *
 * - `hermes-qwen2.5-coder-0.5b`: Hermes 0.19.0 on Qwen2.5-Coder-0.5B-Instruct (vLLM, 32K context)
 *   solving build-hello-file. Its first call got no token within 120 s (the 12,861-token prompt was
 *   still being computed) and Hermes retried it: an abandoned branch. The three calls after it join
 *   by messages, never by token ids: Hermes sends the model's tool call back in its own words.
 *
 * Returned unparsed: each test parses it with the contract it checks.
 */
export function recordedTrajectory(name: "hermes-qwen2.5-coder-0.5b"): unknown {
  const file = new URL(`../fixtures/${name}.trajectory.json.gz`, import.meta.url);
  return JSON.parse(gunzipSync(readFileSync(file)).toString("utf8"));
}
