import {
  type AdapterRef,
  adapterParts,
  type EvalOutput,
  type EvalReport,
  type LineageDecision,
  type LineageKey,
  lineageOf,
  SearchAttributes,
  TaskQueues,
  versionOf,
} from "@bridle/contracts";
import { executeChild, proxyActivities, upsertSearchAttributes, workflowInfo } from "@temporalio/workflow";
import type { Activities } from "../activities.ts";

export const { lineage, decide } = proxyActivities<Activities>({
  startToCloseTimeout: "1 minute",
  retry: { maximumInterval: "30 seconds", maximumAttempts: 20 },
});

export interface DecisionInput {
  key: LineageKey;
  adapter: AdapterRef;
  reason: string;
  /** The evaluation behind the decision; null for one made by hand. */
  evalId: string | null;
}

/**
 * Makes a serving version its lineage's promoted one: what runs that continue the lineage start
 * from. One workflow per decision (its id is the decision's), searchable by kind, model, harness
 * and run.
 */
export async function promotion(input: DecisionInput): Promise<LineageDecision> {
  return decideAs("promote", input);
}

/**
 * Takes a promoted version back: the lineage returns to what was promoted before it (or to the
 * base model alone), the reason recorded. Refused when the version is no longer the promoted one.
 */
export async function rollback(input: DecisionInput): Promise<LineageDecision> {
  return decideAs("rollback", input);
}

async function decideAs(action: "promote" | "rollback", input: DecisionInput): Promise<LineageDecision> {
  upsertSearchAttributes([
    { key: SearchAttributes.kind, value: action === "promote" ? "promotion" : "rollback" },
    { key: SearchAttributes.model, value: input.key.model },
    { key: SearchAttributes.harness, value: input.key.harness },
    { key: SearchAttributes.run, value: adapterParts(input.adapter.name)!.run },
  ]);
  return decide({
    key: input.key,
    request: {
      id: workflowInfo().workflowId,
      action,
      adapter: input.adapter,
      reason: input.reason,
      evalId: input.evalId,
    },
  });
}

/**
 * What an evaluation's verdict changes in its candidate's lineage. A versioned adapter that is not
 * promoted is promoted when the verdict says so against what the lineage promotes now (the base
 * model when nothing is); the promoted version itself is rolled back when it regressed. Anything
 * else (a base model or bare name as candidate, a comparison against something else, another
 * harness) changes nothing.
 */
export async function actOnVerdict(
  config: { id: string; candidate: string; baseline: string; harness: string },
  report: EvalReport,
): Promise<EvalOutput["decision"]> {
  const verdict = report.verdict;
  const adapter = versionOf(config.candidate);
  const key = adapter ? lineageOf(adapter.name) : null;
  // An adapter judged in another harness than its own (the cross-harness matrix) says nothing of
  // its lineage, which is per harness.
  if (!verdict || !adapter || !key || key.harness !== config.harness) return null;
  const current = await lineage(key);
  const promoted = current.promoted;
  const isPromoted = promoted?.name === adapter.name && promoted.version === adapter.version;
  const against = promoted ? promoted.servedName : key.model;
  const figures = verdict.reasons.join("; ");
  let action: "promote" | "rollback" | null = null;
  let reason = "";
  if (isPromoted && verdict.checks.regressed) {
    action = "rollback";
    reason = `${config.candidate} regressed against ${config.baseline} in evaluation ${config.id}: ${figures}`;
  } else if (!isPromoted && verdict.decision === "promote" && config.baseline === against) {
    action = "promote";
    reason = `${config.candidate} passed the gate against ${against} in evaluation ${config.id}: ${figures}`;
  }
  if (!action) return null;
  const workflowId = `${action === "promote" ? "promote" : "rollback"}-${workflowInfo().workflowId}`;
  const outcome = await executeChild(action === "promote" ? promotion : rollback, {
    workflowId,
    taskQueue: TaskQueues.control,
    args: [{ key, adapter, reason, evalId: config.id }],
  });
  return { action, workflowId, outcome };
}
