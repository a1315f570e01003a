import type { ProbeRequest, ProbeResult } from "@bridle/contracts";
import { proxyActivities, workflowInfo } from "@temporalio/workflow";
import type { Activities } from "../activities.ts";

const { describeModel, sampleCompletion } = proxyActivities<Activities>({
  startToCloseTimeout: "2 minutes",
  retry: { initialInterval: "1 second", maximumInterval: "10 seconds", maximumAttempts: 5 },
});

/**
 * The walking skeleton: proves that the gateway, Temporal, a worker, the serving service and the
 * model server are all up and wired together, by asking for one short completion.
 */
export async function probeStack(input: ProbeRequest): Promise<ProbeResult> {
  const started = workflowInfo().startTime.getTime();
  const model = await describeModel();
  const completion = await sampleCompletion({
    model: model.id,
    prompt: input.prompt,
    maxTokens: input.maxTokens,
    temperature: 0,
  });
  return { model, completion, elapsedMs: Date.now() - started };
}
