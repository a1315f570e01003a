import type { StackConfig } from "@bridle/stack";
import { answer, gatewayClient } from "../gateway.ts";

/** Runs the stack probe workflow through the gateway and waits for its result. */
export async function runProbe(config: StackConfig, prompt?: string) {
  const api = gatewayClient(config);
  const started = await answer((init) => api.v1.probes.$post({ json: prompt ? { prompt } : {} }, { init }));
  return answer(
    (init) => api.v1.probes[":id"].$get({ param: { id: started.id }, query: { wait: "true" } }, { init }),
    300_000,
  );
}
