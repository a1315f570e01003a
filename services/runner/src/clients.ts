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
  verifierUrl: string;
}

export const agentTask = (s: RolloutServices, taskId: string) =>
  callJson(`${s.tasksUrl}/v1/tasks/${encodeURIComponent(taskId)}/agent`, {
    schema: AgentTask,
    timeoutMs: 30_000,
  });

export const registerSession = (
  s: RolloutServices,
  registration: Partial<SessionRegistration> & { instruction: string; adapter: string },
) =>
  callJson(`${s.guardUrl}/admin/sessions`, { schema: SessionCreated, body: registration, timeoutMs: 10_000 });

export const trajectoryUrl = (s: RolloutServices, sessionId: string) =>
  `${s.guardUrl}/admin/sessions/${encodeURIComponent(sessionId)}/trajectory`;

export const trajectory = (s: RolloutServices, sessionId: string) =>
  callJson(trajectoryUrl(s, sessionId), { schema: Trajectory, timeoutMs: 30_000 });

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
