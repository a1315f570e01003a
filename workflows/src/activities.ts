import { mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  AdapterList,
  type AdapterRef,
  AdapterVersion,
  BaseModelInfo,
  type Calibration,
  type CompletionRequest,
  CompletionResult,
  type DecisionRequest,
  type EvalReport,
  LineageDecision,
  type LineageKey,
  LineageView,
  type RolloutRequest,
  type RolloutResult,
  RolloutState,
  SampleResult,
  type StepMetrics,
  type StepRef,
  TaskSummary,
  type TrainConfig,
  TrainStepView,
} from "@bridle/contracts";
import { attemptHeader, callJson, readGrant, ServiceError } from "@bridle/service-kit";
import { ApplicationFailure, Context, heartbeat, sleep } from "@temporalio/activity";
import { z } from "zod";

export interface ActivityDeps {
  servingUrl: string;
  tasksUrl: string;
  runnerUrl: string;
  guardUrl: string;
  /** The guard's admin token: trajectories are behind it. */
  guardAdminToken: string;
  trainerUrl: string;
  /** Where evaluation reports are written for people to read. */
  dataDir: string;
}

/** One rollout's contribution to a training batch: a reference, never the trajectory itself. */
export interface BatchEntry {
  group: string;
  reward: number;
  guardSession: string;
  /**
   * Where the trajectory is read: the guard that recorded it, as its runner said (runners and
   * guards may run on other hosts). Absent in histories from before: this worker's guard.
   */
  trajectory?: string;
}

export interface TrainStepInput {
  run: string;
  step: number;
  config: TrainConfig;
  batch: BatchEntry[];
  /**
   * What the step's rollouts sampled from: its served name and adapter version (null: the base
   * model). A sample whose calls serving's registry did not name as exactly this is not trained on.
   * Absent in histories from before the proof was checked.
   */
  served?: { model: string; version: number | null };
  /** Step 1 of a run that continues a lineage: the committed step its adapter starts from. */
  parent?: StepRef;
}

export interface TrainStepSummary {
  applied: boolean;
  adapterHash: string;
  loss: number;
  replayed: boolean;
  tokensPerSecond: number;
  kl: number;
  clipFraction: number;
  logprobDiff: number | null;
  tokens: number;
  /** Samples refused: a call of theirs was not proven served by the step's adapter version. */
  refused?: number;
}

/**
 * The longest a worker holds back an activity's heartbeat. Temporal tells an activity it was
 * cancelled in the answer to a heartbeat, and by default throttles heartbeats to 0.8 times the
 * heartbeat timeout (24 s here): capped at 5 s, a cancelled run stops its rollouts, step or adapter
 * load within about 5 s. Every worker that runs these activities sets it.
 */
export const HEARTBEAT_THROTTLE_MAX = "5 seconds";

/**
 * After a service dropped a call (it died mid-request), waits, heartbeating, until it answers its
 * health check again (the stack restarts it), so that the retry goes to the new one and a rollout is
 * retried once rather than spending attempts on a restart. Gives up after `ms` and lets it retry.
 */
async function awaitBackUp(baseUrl: string, ms = 180_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    heartbeat({ waitingFor: baseUrl });
    const up = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(5_000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return;
    await sleep(1_000);
  }
}

/**
 * Whether the activity of `context` was cancelled for good: its workflow asked, or the workflow is
 * gone (a cancelled workflow closes at once, and the activity's next heartbeat finds it no longer
 * exists). Only then is the work it waits for stopped: a worker shutting down, a timeout or a pause
 * also cancel an activity, and then its retry must find the rollout or step still running, to pick
 * it up where it is. (The context is taken when the activity starts: an abort listener runs outside it.)
 */
const cancelledForGood = (context: Context) =>
  context.cancellationDetails?.cancelRequested === true || context.cancellationDetails?.notFound === true;

/**
 * Follows a submitted long job (rollout, training step, adapter load) to its end: reads it every
 * `everyMs` while it runs, heartbeating its progress. When the activity is cancelled for good, the
 * service is told to stop the job (a job no longer running has nothing to stop), and the
 * cancellation goes on up.
 */
async function followJob<J, Running extends J>(
  context: Context,
  submitted: J,
  job: {
    running: (j: J) => j is Running;
    progress: (j: Running) => unknown;
    read: (j: J) => Promise<J>;
    cancel: (j: J) => Promise<unknown>;
    everyMs: number;
  },
): Promise<Exclude<J, Running>> {
  let current = submitted;
  try {
    while (job.running(current)) {
      heartbeat(job.progress(current));
      await sleep(job.everyMs); // rejects once the activity is cancelled
      current = await job.read(current);
    }
    return current as Exclude<J, Running>;
  } catch (err) {
    if (cancelledForGood(context)) await job.cancel(current).catch(() => undefined);
    throw err;
  }
}

/** A 4xx from a service is a bad input that retrying will not fix. */
function nonRetryable(err: unknown): never {
  if (err instanceof ServiceError && !err.retryable && err.status < 500) {
    throw ApplicationFailure.nonRetryable(err.message, err.code);
  }
  throw err;
}

/**
 * Tasks in a stable order that takes each category in turn (ids sorted within a category), so the
 * first N of them cover the categories evenly.
 */
function stratified<T extends { id: string; category: string }>(tasks: T[]): T[] {
  const byCategory = new Map<string, T[]>();
  for (const t of [...tasks].sort((a, b) => (a.id < b.id ? -1 : 1)))
    byCategory.set(t.category, [...(byCategory.get(t.category) ?? []), t]);
  const queues = [...byCategory.keys()].sort().map((c) => byCategory.get(c)!);
  const out: T[] = [];
  for (let i = 0; out.length < tasks.length; i++) for (const q of queues) if (q[i]) out.push(q[i]!);
  return out;
}

/**
 * Activities are built by a factory so their dependencies (service URLs) are injected by the
 * worker. Each is an HTTP call to a service; payloads stay small (ids and references).
 */
export function createActivities(deps: ActivityDeps) {
  return {
    async describeModel(): Promise<BaseModelInfo> {
      return callJson(`${deps.servingUrl}/v1/base-model`, { schema: BaseModelInfo });
    },

    async sampleCompletion(request: CompletionRequest): Promise<CompletionResult> {
      return callJson(`${deps.servingUrl}/v1/completions`, {
        schema: CompletionResult,
        body: request,
        timeoutMs: 120_000,
      });
    },

    /** A seeded, stratified batch of training tasks. */
    async sampleTasks(input: {
      seed: number;
      cursor: number;
      size: number;
      categories?: string[];
      ids?: string[];
      unproven?: boolean;
    }): Promise<SampleResult> {
      return callJson(`${deps.tasksUrl}/v1/samples`, {
        schema: SampleResult,
        body: { ...input, split: "train" },
      }).catch(nonRetryable);
    },

    /** Held-out tasks for an evaluation, in a stable order. */
    async heldOutTasks(input: {
      limit: number;
      ids?: string[];
      /** An evaluation's tasks: each named one must be held out and have passed its controls. */
      judged?: boolean;
      /** Tasks whose controls are unproven (no reference solution, nop passed) count as passed. */
      unproven?: boolean;
    }): Promise<{ id: string; category: string; hash: string; impossible: boolean; unproven?: boolean }[]> {
      const eligible = (t: TaskSummary) => t.controls?.passed || (input.unproven && t.controls?.unproven);
      const list = await callJson(`${deps.tasksUrl}/v1/tasks?split=held-out`, {
        schema: z.object({ tasks: z.array(TaskSummary) }),
      });
      let all = list.tasks.filter(eligible);
      if (input.ids) {
        // Named tasks must exist; an evaluation's must also be what it judges on: held out, with a
        // verifier that passed its controls. Anything else is refused by name before a rollout runs.
        const known = new Map(
          (
            await callJson(`${deps.tasksUrl}/v1/tasks`, { schema: z.object({ tasks: z.array(TaskSummary) }) })
          ).tasks.map((t) => [t.id, t]),
        );
        const problems = input.ids.flatMap((id) => {
          const task = known.get(id);
          if (!task) return [`no task '${id}' in the registry`];
          if (!input.judged) return [];
          if (task.split !== "held-out") return [`task '${id}' is in the ${task.split} split, not held out`];
          if (task.controls?.unproven && !eligible(task))
            return [
              `task '${id}' has no reference solution (its controls are unproven): judge it with unproven`,
            ];
          if (!eligible(task))
            return [`task '${id}' has ${task.controls ? "failed" : "not run"} its controls`];
          return [];
        });
        if (problems.length > 0)
          throw ApplicationFailure.nonRetryable(`the named tasks: ${problems.join("; ")}`, "invalid_tasks");
        all = input.ids.map((id) => known.get(id)!);
      }
      return stratified(all)
        .slice(0, input.limit)
        .map((t) => ({
          id: t.id,
          category: t.category,
          hash: t.hash,
          impossible: t.impossible,
          unproven: !t.controls?.passed && t.controls?.unproven === true,
        }));
    },

    /** A task's measured base success, into the registry. */
    async recordCalibration(input: { taskId: string; record: Calibration }): Promise<void> {
      await callJson(`${deps.tasksUrl}/v1/tasks/${encodeURIComponent(input.taskId)}/calibration`, {
        schema: z.unknown(),
        method: "PUT",
        body: input.record,
      }).catch(nonRetryable);
    },

    /**
     * One rollout, run to the end by the runner (idempotent by rollout id): submitted, then its
     * state read every two seconds, heartbeating. A runner that restarted and lost it is given it
     * again. When the activity is cancelled for good (its run or job was), the runner is told to
     * cancel the rollout: it kills the harness and removes the sandbox.
     */
    async runRollout(request: RolloutRequest): Promise<RolloutResult> {
      const context = Context.current();
      const info = context.info;
      const rolloutId = request.rolloutId ?? `${info.workflowExecution?.workflowId}/${info.activityId}`;
      const url = `${deps.runnerUrl}/v1/rollouts`;
      const at = `${url}/${encodeURIComponent(rolloutId)}`;
      // The runner lets a later attempt's rollout go on when an earlier (timed-out) attempt cancels.
      const attempt = attemptHeader(info.attempt);
      const down = async (err: unknown): Promise<never> => {
        if (err instanceof ServiceError && err.code === "unreachable") await awaitBackUp(deps.runnerUrl);
        return nonRetryable(err);
      };
      const submit = () =>
        callJson(`${url}?wait=false`, {
          schema: RolloutState,
          body: { ...request, rolloutId },
          headers: attempt,
          timeoutMs: 60_000,
        }).catch(down);
      const state = await followJob(context, await submit(), {
        running: (s) => s.state === "running",
        progress: (s) => ({ rolloutId, elapsedMs: s.elapsedMs }),
        everyMs: 2_000,
        read: () =>
          callJson(`${at}/state`, { schema: RolloutState }).catch(async (err: unknown) => {
            if (!(err instanceof ServiceError)) throw err;
            if (err.code === "unreachable") await awaitBackUp(deps.runnerUrl);
            else if (err.status !== 404) return nonRetryable(err);
            return submit(); // a runner that restarted has lost it: it runs again, under the same id
          }),
        cancel: () => callJson(at, { method: "DELETE", headers: attempt, schema: z.unknown() }),
      });
      if (state.state === "done") return state.result;
      const { message, status, code, retryable } = state.error;
      return nonRetryable(new ServiceError(`rollout ${rolloutId}: ${message}`, status, code, retryable));
    },

    /**
     * One GRPO step, exactly once: the trainer keys it by (run, step) and returns the committed
     * result when it is submitted again. The batch goes by reference: each sample's URL at the
     * guard that recorded it, with the session's read grant, so the trainer reads the trajectories
     * itself and they pass neither through this worker nor through workflow history.
     */
    async trainStep(input: TrainStepInput): Promise<TrainStepSummary> {
      const context = Context.current();
      const samples = input.batch.map((entry) => {
        const url = new URL(
          entry.trajectory ??
            `${deps.guardUrl}/admin/sessions/${encodeURIComponent(entry.guardSession)}/trajectory`,
        );
        url.searchParams.set("grant", readGrant(deps.guardAdminToken, entry.guardSession));
        return { group: entry.group, reward: entry.reward, url: url.toString() };
      });
      // No rollout captured token ids (say, every model call failed while the model server was
      // down): the trainer records the step as a no-op, so the run goes on to its next step.
      const body = {
        run: input.run,
        step: input.step,
        config: input.config,
        samples,
        ...(input.served ? { served: input.served } : {}),
        ...(input.parent ? { parent: input.parent } : {}),
      };
      // The trainer lets a later attempt's step go on when an earlier (timed-out) attempt cancels.
      const attempt = attemptHeader(context.info.attempt);
      const stepUrl = `${deps.trainerUrl}/v1/steps/${input.run}/${input.step}`;
      const submitted = await callJson(`${deps.trainerUrl}/v1/steps`, {
        schema: TrainStepView,
        body,
        headers: attempt,
        timeoutMs: 120_000,
      }).catch(nonRetryable);
      // Cancelled (its run was), the trainer stops the step rather than finish work nobody waits for.
      const view = await followJob(context, submitted, {
        running: (v) => v.state === "running",
        progress: (v) => v.progress,
        everyMs: 1_000,
        read: () => callJson(stepUrl, { schema: TrainStepView }),
        cancel: () =>
          callJson(stepUrl, { method: "DELETE", headers: attempt, schema: z.unknown(), timeoutMs: 30_000 }),
      });
      if (view.state === "failed") {
        if (view.error.retryable)
          throw new Error(`trainer step failed (${view.error.code}): ${view.error.message}`);
        throw ApplicationFailure.nonRetryable(view.error.message, view.error.code);
      }
      const r = view.result;
      return {
        applied: r.applied,
        adapterHash: r.adapterHash,
        loss: r.loss,
        replayed: r.replayed,
        tokensPerSecond: r.tokensPerSecond,
        kl: r.kl,
        clipFraction: r.clipFraction,
        logprobDiff: r.logprobDiff,
        tokens: r.tokens,
        refused: r.refused,
      };
    },

    /**
     * Loads the adapter a training step committed on the model server and proves it with the
     * canary. Serving gets it by reference (the trainer's URL of the step's adapter files and their
     * content hash) and fetches it itself; then the version is read every second, heartbeating,
     * until it serves or failed. Cancelled, the activity cancels the load.
     */
    async loadAdapter(input: {
      name: string;
      version: number;
      run: string;
      step: number;
      hash: string;
      /** The version its weights started from (absent in histories from before lineages). */
      parent?: AdapterRef | null;
    }): Promise<AdapterVersion> {
      const context = Context.current();
      const url = `${deps.servingUrl}/v1/adapters/${input.name}/versions`;
      const source = {
        url: `${deps.trainerUrl}/v1/steps/${encodeURIComponent(input.run)}/${input.step}/adapter`,
        hash: input.hash,
      };
      const submitted = await callJson(url, {
        schema: AdapterVersion,
        body: {
          source,
          step: input.step,
          version: input.version,
          ...(input.parent ? { parent: input.parent } : {}),
        },
        timeoutMs: 60_000,
      }).catch(nonRetryable);
      const v = await followJob(context, submitted, {
        running: (v): v is AdapterVersion & { state: "loading" } => v.state === "loading",
        progress: (v) => v.state,
        everyMs: 1_000,
        read: (v) => callJson(`${url}/${v.version}`, { schema: AdapterVersion }),
        cancel: (v) => callJson(`${url}/${v.version}`, { method: "DELETE", schema: z.unknown() }),
      });
      if (v.state === "serving") return v;
      const error = v.error ?? { code: "load_failed", message: `${v.servedName} is ${v.state}` };
      // The model server or the trainer went away (or serving restarted) mid-load: the same version
      // is loaded again.
      if (["model_server_unavailable", "load_interrupted", "source_unavailable"].includes(error.code))
        throw new Error(`${v.servedName} did not load (${error.code}): ${error.message}`);
      throw ApplicationFailure.nonRetryable(`${v.servedName}: ${error.message}`, error.code);
    },

    /**
     * What serves `model`: an adapter version's number and hash, or nulls for the base model and for
     * an adapter's bare name (its current version, resolved per request). A model serving does not
     * know, or a version it no longer serves, is refused here, before any rollout asks for it.
     */
    async resolveServed(model: string): Promise<{ version: number | null; hash: string | null }> {
      const list = await callJson(`${deps.servingUrl}/v1/adapters`, {
        schema: AdapterList,
      });
      const version = list.adapters.flatMap((a) => a.versions).find((v) => v.servedName === model);
      if (version) {
        if (version.state !== "serving")
          throw ApplicationFailure.nonRetryable(
            `model '${model}' is ${version.state}: serving no longer answers for it`,
            "model_not_served",
          );
        return { version: version.version, hash: version.hash };
      }
      if (list.adapters.some((a) => a.name === model)) return { version: null, hash: null };
      const base = await callJson(`${deps.servingUrl}/v1/base-model`, { schema: BaseModelInfo });
      if (base.id === model) return { version: null, hash: null };
      throw ApplicationFailure.nonRetryable(
        `serving knows no model '${model}': name the base model (${base.id}), an adapter, or one of its versions (<name>@v<N>; GET /v1/adapters lists them)`,
        "model_not_found",
      );
    },

    /** A (model, harness)'s lineage as serving keeps it: its promoted version and decisions. */
    async lineage(key: LineageKey): Promise<LineageView> {
      return callJson(`${deps.servingUrl}/v1/lineages/${key.model}/${key.harness}`, {
        schema: LineageView,
      }).catch(nonRetryable);
    },

    /** Records a promotion or rollback with serving (once per decision id). */
    async decide(input: { key: LineageKey; request: DecisionRequest }): Promise<LineageDecision> {
      const { key, request } = input;
      return callJson(`${deps.servingUrl}/v1/lineages/${key.model}/${key.harness}/decisions`, {
        body: request,
        schema: LineageDecision,
      }).catch(nonRetryable);
    },

    /** A step's figures, into the trainer's record of the run, where the whole run is kept. */
    async recordMetrics(input: { run: string; metrics: StepMetrics }): Promise<void> {
      const { run, metrics } = input;
      await callJson(`${deps.trainerUrl}/v1/runs/${encodeURIComponent(run)}/metrics/${metrics.step}`, {
        method: "PUT",
        body: metrics,
        schema: z.unknown(),
        timeoutMs: 30_000,
      }).catch(nonRetryable);
    },

    /** Writes an evaluation report as JSON and Markdown where people can read it. */
    async writeReport(input: {
      id: string;
      report: EvalReport;
      markdown: string;
    }): Promise<{ json: string; markdown: string }> {
      const dir = join(deps.dataDir, "evals", input.id);
      await mkdir(dir, { recursive: true });
      const files = { json: join(dir, "report.json"), markdown: join(dir, "report.md") };
      await writeFile(`${files.json}.tmp`, JSON.stringify(input.report, null, 2));
      await rename(`${files.json}.tmp`, files.json);
      await writeFile(`${files.markdown}.tmp`, input.markdown);
      await rename(`${files.markdown}.tmp`, files.markdown);
      return files;
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
