import {
  AgentTask,
  type RolloutRequest,
  SessionCreated,
  type SessionRegistration,
  Trajectory,
  type VerificationRequest,
  VerificationResult,
} from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";

/** The services a rollout talks to, over HTTP, through their contracts. */
export interface RolloutServices {
  tasksUrl: string;
  guardUrl: string;
  /** The guard's admin token: sessions and trajectories are behind it. */
  guardAdminToken: string;
  verifierUrl: string;
}

const admin = (s: RolloutServices) => ({ authorization: `Bearer ${s.guardAdminToken}` });

export const agentTask = (s: RolloutServices, taskId: string) =>
  callJson(`${s.tasksUrl}/v1/tasks/${encodeURIComponent(taskId)}/agent`, {
    schema: AgentTask,
    timeoutMs: 30_000,
  });

export const registerSession = (
  s: RolloutServices,
  registration: Partial<SessionRegistration> & { instruction: string; adapter: string },
) =>
  callJson(`${s.guardUrl}/admin/sessions`, {
    schema: SessionCreated,
    body: registration,
    headers: admin(s),
    timeoutMs: 10_000,
  });

export const trajectoryUrl = (s: RolloutServices, sessionId: string) =>
  `${s.guardUrl}/admin/sessions/${encodeURIComponent(sessionId)}/trajectory`;

export const trajectory = (s: RolloutServices, sessionId: string) =>
  callJson(trajectoryUrl(s, sessionId), { schema: Trajectory, headers: admin(s), timeoutMs: 30_000 });

/**
 * The trajectory once the guard has written every call of the session. The guard appends a call's
 * record just after the harness has read the reply, so a harness that exits (or is killed) at
 * once can be faster than that write: read until two reads `settleMs` apart agree.
 */
export async function settledTrajectory(s: RolloutServices, sessionId: string, settleMs = 100) {
  let previous = await trajectory(s, sessionId);
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    const current = await trajectory(s, sessionId);
    if (current.calls === previous.calls) return current;
    previous = current;
  }
  return previous;
}

export const verify = (
  s: RolloutServices,
  request: Partial<VerificationRequest> & { taskId: string; workspace: string },
) =>
  callJson(`${s.verifierUrl}/v1/verifications`, {
    schema: VerificationResult,
    body: request,
    timeoutMs: 3_600_000,
  });

export type { RolloutRequest };
