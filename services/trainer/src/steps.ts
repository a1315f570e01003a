import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  type Issue,
  type ScoredTrajectory,
  type ServedVersion,
  type StepProgress,
  type TrainStepRequest,
  TrainStepResult,
  type TrainStepView,
  Trajectory,
  type TrajectoryRef,
  trainableCalls,
  unprovenCalls,
} from "@bridle/contracts";
import { callJson, httpError, type Logger, ServiceError } from "@bridle/service-kit";
import type { TrainerWorker } from "./worker.ts";

/** JSON with sorted keys, so equal batches hash equally whatever order their keys came in. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The hash a step record keeps of what it trained on; a resubmission must match it. */
export function batchHash(request: TrainStepRequest): string {
  return createHash("sha256")
    .update(
      canonical({
        config: request.config,
        trajectories: request.trajectories ?? [],
        // Absent in a fresh run's steps and in batches given whole, whose hashes stay what they were.
        ...(request.parent ? { parent: request.parent } : {}),
        ...(request.samples ? { samples: request.samples } : {}),
        ...(request.served ? { served: request.served } : {}),
      }),
    )
    .digest("hex");
}

/** Token ids must fit the worker's vocabulary and sequences its context: named per path. */
export function checkAgainstModel(
  trajectories: ScoredTrajectory[],
  worker: TrainerWorker,
  at = "body.trajectories",
): void {
  const { vocabSize, maxTokens } = worker.info;
  if (vocabSize === null || maxTokens === null) {
    throw httpError(503, "trainer_starting", "the trainer worker is still loading the model", {
      retryable: true,
    });
  }
  const issues: Issue[] = [];
  trajectories.forEach((t, i) => {
    t.calls.forEach((call, j) => {
      const path = `${at}.${i}.calls.${j}`;
      for (const key of ["promptTokenIds", "completionTokenIds"] as const) {
        const bad = call[key].findIndex((id) => id >= vocabSize);
        if (bad >= 0)
          issues.push({
            path: `${path}.${key}.${bad}`,
            message: `token id ${call[key][bad]} is outside the vocabulary (size ${vocabSize})`,
          });
      }
      const length = call.promptTokenIds.length + call.completionTokenIds.length;
      if (length > maxTokens)
        issues.push({ path, message: `${length} tokens exceed the model's context of ${maxTokens}` });
    });
  });
  if (issues.length > 0) {
    throw httpError(400, "invalid_batch", "The batch does not fit the model", {
      issues: issues.slice(0, 20),
    });
  }
}

/**
 * Reads a step's samples from the guards that recorded them (each URL carries its session's read
 * grant) and keeps what training needs: the main branch's calls with token ids, from samples whose
 * every call serving proved served by `served`. A guard that cannot be reached fails the step as
 * retryable, so the caller's retry reads it again.
 */
async function readSamples(
  samples: TrajectoryRef[],
  served: ServedVersion | undefined,
  log: Logger,
  signal: AbortSignal,
): Promise<{ trajectories: ScoredTrajectory[]; refused: number }> {
  const trajectories: ScoredTrajectory[] = [];
  let refused = 0;
  for (const sample of samples) {
    signal.throwIfAborted();
    const trajectory = await callJson(sample.url, { schema: Trajectory, timeoutMs: 60_000, signal }).catch(
      (err: unknown) => {
        if (signal.aborted) throw signal.reason;
        // The URL's grant opens the trajectory: errors name the URL without it.
        if (err instanceof ServiceError) {
          const shown = sample.url.split("?")[0]!;
          throw new ServiceError(
            `reading a sample: ${err.message.replaceAll(sample.url, shown)}`,
            err.status,
            err.code,
            err.retryable,
          );
        }
        throw err;
      },
    );
    const unproven = served ? unprovenCalls(trajectory, served) : [];
    if (unproven.length > 0) {
      refused++;
      log.warn(
        { session: trajectory.sessionId, expected: served, servedBy: unproven },
        "a sample not proven served by the step's adapter version is not trained on",
      );
      continue;
    }
    const calls = trainableCalls(trajectory);
    if (calls.length > 0) trajectories.push({ group: sample.group, reward: sample.reward, calls });
  }
  return { trajectories, refused };
}

interface Job {
  run: string;
  step: number;
  batchHash: string;
  progress: StepProgress;
  /** The latest attempt of the caller's activity that submitted it. */
  attempt: number;
  /** Stops the reading of its samples (the worker is cancelled on its own). */
  reading: AbortController;
}

type Failure = Extract<TrainStepView, { state: "failed" }>["error"];

/** A batch that kills the worker this many times in a row fails for good instead of looping. */
export const MAX_WORKER_DEATHS = 3;

/**
 * Runs steps on the worker, one at a time, exactly once per (run, step). The committed step
 * record on disk (written by the worker) is the source of truth; this keeps only what is in flight
 * and the last failure of each step, so a restart of the service loses nothing that matters.
 */
export class TrainingSteps {
  private job: Job | undefined;
  private failures = new Map<string, Failure>();
  /** Worker deaths in a row per step and batch (`run/step/hash`). */
  private deaths = new Map<string, number>();

  constructor(
    private readonly worker: TrainerWorker,
    private readonly dataDir: string,
    private readonly log: Logger,
  ) {}

  /** The committed result of a step, or undefined when it has not completed. */
  committed(run: string, step: number): TrainStepResult | undefined {
    const file = join(this.dataDir, "runs", run, "steps", String(step).padStart(8, "0"), "result.json");
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      return undefined;
    }
    return TrainStepResult.parse({ ...JSON.parse(text), replayed: true });
  }

  /**
   * A step reads as done only once its job has let go of the trainer: the worker commits the step's
   * files before it reports back, and a caller that saw "done" in that gap would find its next step
   * refused as `trainer_busy`.
   */
  view(run: string, step: number): TrainStepView | undefined {
    if (this.job?.run === run && this.job.step === step) {
      return { state: "running", run, step, progress: this.job.progress };
    }
    const result = this.committed(run, step);
    if (result) return { state: "done", run, step, result };
    const error = this.failures.get(`${run}/${step}`);
    return error ? { state: "failed", run, step, error } : undefined;
  }

  /**
   * Cancels the step if it is the one running (it then fails as `step_cancelled`). An earlier
   * attempt of the caller's activity (one that timed out while its retry took the step over)
   * cannot cancel it from under the later one.
   */
  cancel(run: string, step: number, attempt: number): "cancelled" | "not_running" | "superseded" {
    if (this.job?.run !== run || this.job.step !== step) return "not_running";
    if (attempt < this.job.attempt) return "superseded";
    this.log.info({ run, step }, "step cancelled");
    if (this.job.progress.phase === "fetch") {
      this.job.reading.abort(
        new ServiceError(`step ${step} of run ${run} was cancelled`, 409, "step_cancelled", false),
      );
      return "cancelled";
    }
    return this.worker.cancel() ? "cancelled" : "not_running";
  }

  /** Starts a step, or reports the one already running or done. Throws the HTTP error otherwise. */
  submit(request: TrainStepRequest, attempt = 0): TrainStepView {
    const { run, step } = request;
    const hash = batchHash(request);
    const done = this.committed(run, step);
    if (done) {
      if (done.batchHash !== hash) throw conflict(run, step, "completed");
      return { state: "done", run, step, result: done };
    }
    if (this.job) {
      if (this.job.run === run && this.job.step === step) {
        if (this.job.batchHash !== hash) throw conflict(run, step, "is running");
        this.job.attempt = Math.max(this.job.attempt, attempt);
        return { state: "running", run, step, progress: this.job.progress };
      }
      throw httpError(
        409,
        "trainer_busy",
        `the trainer is running step ${this.job.step} of run ${this.job.run}`,
        {
          retryable: true,
        },
      );
    }
    const killer = this.failures.get(`${run}/${step}`);
    if (
      killer?.code === "step_kills_worker" &&
      (this.deaths.get(`${run}/${step}/${hash}`) ?? 0) >= MAX_WORKER_DEATHS
    )
      throw httpError(422, killer.code, killer.message);
    if (step > 1 && !this.committed(run, step - 1)) {
      throw httpError(
        409,
        "previous_step_missing",
        `step ${step - 1} of run ${run} has not completed; steps apply in order`,
      );
    }
    if (this.worker.info.state !== "ready") {
      throw httpError(503, "trainer_unavailable", `the trainer worker is ${this.worker.info.state}`, {
        retryable: true,
      });
    }
    const job: Job = {
      run,
      step,
      batchHash: hash,
      progress: { phase: request.samples?.length ? "fetch" : "queued", done: 0, total: 0 },
      attempt,
      reading: new AbortController(),
    };
    this.job = job;
    this.failures.delete(`${run}/${step}`);
    const log = this.log.child({ run, step });
    log.info(
      { trajectories: request.trajectories?.length ?? 0, samples: request.samples?.length ?? 0 },
      "step started",
    );
    this.prepare(request, job, log)
      .then(({ trajectories, refused }) => {
        const { samples: _samples, served: _served, ...rest } = request;
        return this.worker.run({ ...rest, trajectories, refused, batchHash: hash }, (progress) => {
          job.progress = progress;
        });
      })
      .then(
        (result) => {
          this.deaths.delete(`${run}/${step}/${hash}`);
          log.info({ applied: (result as TrainStepResult).applied }, "step committed");
        },
        (err: unknown) => {
          let failure = toFailure(err);
          if (failure.code === "worker_crashed") {
            const key = `${run}/${step}/${hash}`;
            const deaths = (this.deaths.get(key) ?? 0) + 1;
            this.deaths.set(key, deaths);
            if (deaths >= MAX_WORKER_DEATHS) {
              failure = {
                status: 422,
                code: "step_kills_worker",
                message: `the trainer worker died ${deaths} times in a row on step ${step} of run ${run} (last: ${failure.message}); a SIGKILL is usually the kernel's OOM killer (see dmesg): train on fewer or shorter rollouts, or lower microBatchTokens`,
                retryable: false,
              };
              log.error({ deaths }, "this step kills the trainer worker: failing it");
            }
          }
          this.failures.set(`${run}/${step}`, failure);
          log.warn({ err, code: failure.code }, "step failed");
        },
      )
      .finally(() => {
        if (this.job === job) this.job = undefined;
      });
    return { state: "running", run, step, progress: job.progress };
  }

  /** The step's whole batch: what it was given, and what its samples hold once read and checked. */
  private async prepare(
    request: TrainStepRequest,
    job: Job,
    log: Logger,
  ): Promise<{ trajectories: ScoredTrajectory[]; refused: number }> {
    const given = request.trajectories ?? [];
    if (!request.samples?.length) return { trajectories: given, refused: 0 };
    const read = await readSamples(request.samples, request.served, log, job.reading.signal);
    checkAgainstModel(read.trajectories, this.worker, "samples");
    job.progress = { phase: "queued", done: 0, total: 0 };
    return { trajectories: [...given, ...read.trajectories], refused: read.refused };
  }
}

function conflict(run: string, step: number, what: string) {
  return httpError(409, "step_conflict", `step ${step} of run ${run} ${what} with a different batch`);
}

function toFailure(thrown: unknown): Failure {
  // An HTTP error (a batch that does not fit the model) carries its ServiceError as its cause.
  const err = thrown instanceof Error && thrown.cause instanceof ServiceError ? thrown.cause : thrown;
  if (err instanceof ServiceError) {
    return { status: err.status, code: err.code, message: err.message, retryable: err.retryable };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { status: 500, code: "trainer_failed", message, retryable: true };
}
