import { existsSync, statSync } from "node:fs";
import {
  VerifierBundle as BundleSchema,
  type RewardConfig,
  type VerificationRequest,
  type VerificationResult,
  type VerifierBundle,
  type VerifierOutcome,
} from "@bridle/contracts";
import { fromTaskFiles, runTests, type SandboxHost } from "@bridle/harbor";
import { computeReward } from "@bridle/reward";
import { Sandbox } from "@bridle/sandbox";
import { callJson, httpError, type Semaphore, ServiceError } from "@bridle/service-kit";

export interface VerifyDeps extends SandboxHost {
  tasksUrl: string;
  limiter: Semaphore;
  reward: RewardConfig;
  memoryMb: number;
}

async function bundleFor(deps: VerifyDeps, taskId: string): Promise<VerifierBundle> {
  try {
    return await callJson(`${deps.tasksUrl}/v1/tasks/${encodeURIComponent(taskId)}/verifier-bundle`, {
      schema: BundleSchema,
      timeoutMs: 30_000,
    });
  } catch (err) {
    if (err instanceof ServiceError && err.status === 404) {
      throw httpError(404, "task_not_found", `the tasks service has no task '${taskId}'`);
    }
    const message = err instanceof Error ? err.message : String(err);
    throw httpError(503, "tasks_unavailable", `cannot get the tests of '${taskId}': ${message}`, {
      retryable: true,
    });
  }
}

/** The tests to run: the task's, or for a multi-step task the named step's. */
function testsFor(
  bundle: VerifierBundle,
  step: string | undefined,
): Pick<VerifierBundle, "tests" | "verifierTimeoutSec" | "verifierEnv"> {
  if (step === undefined) {
    if (bundle.steps.length > 0)
      throw httpError(
        400,
        "step_required",
        `task ${bundle.id} has steps (${bundle.steps.map((s) => s.name).join(", ")}): name the step to verify`,
        { issues: [{ path: "body.step", message: "required for a multi-step task" }] },
      );
    return bundle;
  }
  const found = bundle.steps.find((s) => s.name === step);
  if (!found)
    throw httpError(
      400,
      "unknown_step",
      bundle.steps.length === 0
        ? `task ${bundle.id} has no steps: verify it without one`
        : `task ${bundle.id} has no step '${step}'; its steps: ${bundle.steps.map((s) => s.name).join(", ")}`,
      { issues: [{ path: "body.step", message: "not a step of the task" }] },
    );
  return found;
}

/**
 * Verifies a finished agent phase: a fresh sandbox over a copy of the workspace, the task's tests
 * copied in, `tests/test.sh` run with the task's timeout, then the reward. The caller's workspace is
 * left untouched.
 */
export async function verify(deps: VerifyDeps, request: VerificationRequest): Promise<VerificationResult> {
  if (!existsSync(request.workspace) || !statSync(request.workspace).isDirectory()) {
    throw httpError(
      400,
      "invalid_workspace",
      `workspace ${request.workspace} is not a folder on the verifier's host`,
      {
        issues: [{ path: "body.workspace", message: "not a folder" }],
      },
    );
  }
  if (request.changes && !(existsSync(request.changes) && statSync(request.changes).isDirectory())) {
    throw httpError(
      400,
      "invalid_changes",
      `changes ${request.changes} is not a folder on the verifier's host`,
      {
        issues: [{ path: "body.changes", message: "not a folder" }],
      },
    );
  }
  const bundle = await bundleFor(deps, request.taskId);
  const tests = testsFor(bundle, request.step);
  const outcome = await deps.limiter.run(async (): Promise<VerifierOutcome> => {
    const image = bundle.image && deps.images ? await deps.images.lookup(bundle.image.digest) : null;
    if (bundle.image && !image) {
      const message = `task ${bundle.id} runs on the image ${bundle.image.tag}, which is not built on this host${deps.images ? "" : " (no IMAGES_HOME)"}`;
      return { correctness: null, failure: "setup", message, exitCode: null, durationMs: 0, outputTail: "" };
    }
    let sandbox: Sandbox;
    try {
      sandbox = await Sandbox.create({
        environmentDir: request.workspace,
        workdir: bundle.workdir,
        ...(deps.sandboxDir ? { baseDir: deps.sandboxDir } : {}),
        // The tests see the image with everything the agent changed on it, not its workspace alone.
        ...(image ? { image: { ...image, layers: request.changes ? [request.changes] : [] } } : {}),
      });
    } catch (err) {
      // A workspace that cannot be copied (a FIFO, a vanished file) never reached the tests.
      const message = `cannot copy the workspace into a sandbox: ${(err as Error).message}`;
      return { correctness: null, failure: "setup", message, exitCode: null, durationMs: 0, outputTail: "" };
    }
    try {
      return await runTests(sandbox, {
        tests: fromTaskFiles(tests.tests),
        timeoutSec: tests.verifierTimeoutSec,
        env: tests.verifierEnv,
        rewardKey: bundle.rewardKey ?? undefined,
        allowedEnv: deps.allowedEnv ?? [],
        memoryMb: deps.memoryMb,
        toolchain: deps.toolchain,
      });
    } finally {
      await sandbox.dispose();
    }
  });
  const config = {
    w: request.reward?.w ?? deps.reward.w,
    budget: request.reward?.budget ?? deps.reward.budget,
  };
  const reward = computeReward(
    { correctness: outcome.correctness, calls: request.calls, blocked: request.blocked, mode: request.mode },
    config,
  );
  return { taskId: bundle.id, hash: bundle.hash, outcome, reward };
}
