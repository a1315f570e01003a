import { ProbeStarted, ProbeView } from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";
import type { StackConfig } from "@bridle/stack";

/** Runs the stack probe workflow through the gateway and waits for its result. */
export async function runProbe(config: StackConfig, prompt?: string): Promise<ProbeView> {
  const gateway = `http://${config.host}:${config.ports.gateway}`;
  const headers = { authorization: `Bearer ${config.apiToken}` };
  const started = await callJson(`${gateway}/v1/probes`, {
    schema: ProbeStarted,
    body: prompt ? { prompt } : {},
    headers,
  });
  return callJson(`${gateway}/v1/probes/${encodeURIComponent(started.id)}?wait=true`, {
    schema: ProbeView,
    headers,
    timeoutMs: 300_000,
  });
}
