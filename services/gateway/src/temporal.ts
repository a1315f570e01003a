import type { WorkflowStatus } from "@bridle/contracts";

/** Links a workflow to its page in the Temporal Web UI. */
export function workflowUiUrl(uiBase: string, namespace: string, workflowId: string): string {
  return `${uiBase.replace(/\/$/, "")}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

const known = new Set<string>([
  "RUNNING",
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "TERMINATED",
  "CONTINUED_AS_NEW",
  "TIMED_OUT",
  "PAUSED",
  "UNSPECIFIED",
]);

export function toStatus(name: string): WorkflowStatus {
  return (known.has(name) ? name : "UNKNOWN") as WorkflowStatus;
}
