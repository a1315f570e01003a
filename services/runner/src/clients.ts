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

/**
 * Ends the guard session once its harness is done and returns the final trajectory: the guard
 * refuses the session's later calls and records the ones under way first (a harness killed
 * mid-answer included), so one read holds every call.
 */
export const endSession = (s: RolloutServices, sessionId: string) =>
  callJson(`${s.guardUrl}/admin/sessions/${encodeURIComponent(sessionId)}/end`, {
    method: "POST",
    schema: Trajectory,
    headers: admin(s),
    timeoutMs: 60_000,
  });

export const verify = (
  s: RolloutServices,
  request: Partial<VerificationRequest> & Pick<VerificationRequest, "taskId" | "workspace">,
) =>
  callJson(`${s.verifierUrl}/v1/verifications`, {
    schema: VerificationResult,
    body: request,
    timeoutMs: 3_600_000,
  });

export type { RolloutRequest };
