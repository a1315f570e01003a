import { WorkflowStatus } from "@bridle/contracts";

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
