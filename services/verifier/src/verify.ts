import {
  VerifierBundle as BundleSchema,
  type RewardConfig,
  type VerificationRequest,
  type VerificationResult,
  type VerifierBundle,
  type VerifierOutcome,
} from "@bridle/contracts";
import { fromTaskFiles, runTests, type SandboxHost, startTaskServices } from "@bridle/harbor";
import { computeReward } from "@bridle/reward";
import { type BuiltImage, Sandbox, ServiceStartError, type TaskServices } from "@bridle/sandbox";
import {
  ArtifactError,
  callJson,
  fetchArtifact,
  httpError,
  type Semaphore,
  ServiceError,
} from "@bridle/service-kit";

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
 * An agent phase's workspace (or image changes), read by reference from the service that holds
 * it. A reference that holds nothing is the caller's mistake (400); an owner that cannot be
 * reached is worth a retry (503); bytes that are not the ones referenced are refused (502).
 */
function received(err: unknown, field: "workspace" | "changes"): never {
  if (!(err instanceof ArtifactError)) throw err;
  if (err.code === "artifact_not_found")
    throw httpError(400, `invalid_${field}`, err.message, {
      issues: [{ path: `body.${field}`, message: "no such artifact held" }],
    });
  if (err.code === "artifact_unavailable")
    throw httpError(503, `${field}_unavailable`, err.message, { retryable: true });
  throw httpError(502, "content_mismatch", `the ${field}: ${err.message}`);
}

/** The tests in a fresh sandbox over the workspace the agent phase left, beside the task's services. */
async function testsOnWorkspace(
  deps: VerifyDeps,
  request: VerificationRequest,
  bundle: VerifierBundle,
  tests: Pick<VerifierBundle, "tests" | "verifierTimeoutSec" | "verifierEnv">,
  image: BuiltImage | null,
  services: TaskServices | undefined,
): Promise<VerifierOutcome> {
  const workspace = await fetchArtifact(request.workspace).catch((err) => received(err, "workspace"));
  const changes = request.changes
    ? await fetchArtifact(request.changes).catch((err) => received(err, "changes"))
    : undefined;
  let sandbox: Sandbox;
  try {
    sandbox = await Sandbox.create({
      ...(services ? { network: services.network } : {}),
      environmentArchive: workspace,
      workdir: bundle.workdir,
      ...(deps.sandboxDir ? { baseDir: deps.sandboxDir } : {}),
      // The tests see the image with everything the agent changed on it, not its workspace alone.
      ...(image ? { image } : {}),
      ...(image && changes ? { changesArchive: changes } : {}),
    });
  } catch (err) {
    // The workspace unpacks first: a transfer that failed after it ended was the changes'.
    if (err instanceof ArtifactError)
      received(err, changes && workspace.readableEnded ? "changes" : "workspace");
    // A workspace that cannot be unpacked never reached the tests.
    const message = `cannot unpack the workspace into a sandbox: ${(err as Error).message}`;
    return { correctness: null, failure: "setup", message, exitCode: null, durationMs: 0, outputTail: "" };
  } finally {
    workspace.destroy();
    changes?.destroy();
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
      user: bundle.user ?? undefined,
    });
  } finally {
    await sandbox.dispose();
  }
}

/**
 * Verifies a finished agent phase: a fresh sandbox over the workspace it left (fetched by
 * reference and unpacked; on an image, with what it changed there laid over the image), the task's
 * tests copied in, `tests/test.sh` run with the task's timeout, then the reward.
 */
export async function verify(deps: VerifyDeps, request: VerificationRequest): Promise<VerificationResult> {
  const bundle = await bundleFor(deps, request.taskId);
  const tests = testsFor(bundle, request.step);
  const outcome = await deps.limiter.run(async (): Promise<VerifierOutcome> => {
    let image: BuiltImage | null = null;
    let missing = deps.images ? "" : " (no IMAGES_HOME)";
    if (bundle.image && deps.images) {
      image = await deps.images.find(bundle.image.digest).catch((err: unknown) => {
        missing = `, and fetching it from the tasks service failed: ${err instanceof Error ? err.message : String(err)}`;
        return null;
      });
    }
    if (bundle.image && !image) {
      const message = `task ${bundle.id} runs on the image ${bundle.image.tag}, which is not built on this host${missing}`;
      return { correctness: null, failure: "setup", message, exitCode: null, durationMs: 0, outputTail: "" };
    }
    // The task's services, started afresh for the tests, on a network shared with their sandbox alone.
    let services: TaskServices | undefined;
    try {
      services = await startTaskServices(bundle.services, {
        images: deps.images,
        allowedEnv: deps.allowedEnv ?? [],
        ...(deps.sandboxDir ? { baseDir: deps.sandboxDir } : {}),
      });
    } catch (err) {
      if (!(err instanceof ServiceStartError)) throw err;
      return {
        correctness: null,
        failure: "setup",
        message: err.message,
        exitCode: null,
        durationMs: 0,
        outputTail: "",
      };
    }
    try {
      return await testsOnWorkspace(deps, request, bundle, tests, image, services);
    } finally {
      await services?.stop();
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
