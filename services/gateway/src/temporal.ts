import { WorkflowStatus } from "@bridle/contracts";
import type { Client } from "@temporalio/client";

/** How many workflows a list answers at most, newest first. */
const LISTED = 200;

/** The workflows of one type, newest first (the latest 200), with their status and UI link. */
export async function listWorkflows(
  temporal: Client,
  workflowType: string,
  ui: (workflowId: string) => string,
): Promise<{ workflowId: string; status: WorkflowStatus; startedAt: string; uiUrl: string }[]> {
  const listed = [];
  for await (const w of temporal.workflow.list({ query: `WorkflowType = '${workflowType}'` })) {
    listed.push({
      workflowId: w.workflowId,
      status: toStatus(w.status.name),
      startedAt: w.startTime.toISOString(),
      uiUrl: ui(w.workflowId),
    });
    if (listed.length >= LISTED) break;
  }
  return listed;
}

/** Links a workflow to its page in the Temporal Web UI. */
export function workflowUiUrl(uiBase: string, namespace: string, workflowId: string): string {
  return `${uiBase.replace(/\/$/, "")}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

/** A Temporal status name as Bridle reports it: one it does not know is UNKNOWN. */
export function toStatus(name: string): WorkflowStatus {
  const parsed = WorkflowStatus.safeParse(name);
  return parsed.success ? parsed.data : "UNKNOWN";
}

/**
 * Why a workflow failed, in the words of whoever said it: the innermost cause of the error (an
 * activity's own failure sits under "Activity task failed", which tells a reader nothing).
 */
export function failureMessage(err: unknown): string {
  let current: unknown = err;
  while (current instanceof Error && current.cause instanceof Error) current = current.cause;
  return current instanceof Error ? current.message : String(current);
}
