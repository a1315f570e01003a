import {
  AgentTask,
  Calibration,
  ImportRequest,
  ImportResult,
  SampleRequest,
  SampleResult,
  TaskId,
  TaskListQuery,
  TaskSummary,
  VerifierBundle,
} from "@bridle/contracts";
import type { SandboxHost } from "@bridle/harbor";
import type { Logger } from "@bridle/service-kit";
import { createRouter, errorContent, httpError, jsonBody, jsonContent } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import { importTasks } from "../importer.ts";
import { sampleBatch } from "../sampler.ts";
import type { TaskStore } from "../store.ts";

export interface TaskRouteDeps extends SandboxHost {
  store: TaskStore;
  log: Logger;
  heldOutRatio: number;
  controlParallel: number;
}

const IdParam = z.object({ id: TaskId });

/** A GET of one view of the task `{id}`: the view, or 404 where the registry has no such task. */
const taskView = <P extends string, T extends z.ZodType>(path: P, summary: string, view: string, schema: T) =>
  createRoute({
    method: "get",
    path,
    summary,
    request: { params: IdParam },
    responses: { 200: jsonContent(schema, view), 404: errorContent("No such task") },
  });

/** The view of task `id`, or the 404 that names it. */
const found = <T>(id: string, view: T | null): T => {
  if (!view) throw httpError(404, "task_not_found", `no task '${id}' in the registry`);
  return view;
};

/** The task registry: list, read, import, sample. */
export function taskRoutes(deps: TaskRouteDeps) {
  const { store } = deps;
  return createRouter()
    .openapi(
      createRoute({
        method: "get",
        path: "/tasks",
        summary: "List tasks, filtered by category, split, controls or label status",
        request: { query: TaskListQuery },
        responses: {
          200: jsonContent(z.object({ tasks: z.array(TaskSummary) }), "Tasks"),
          400: errorContent("Bad filter"),
        },
      }),
      (c) => c.json({ tasks: store.list(c.req.valid("query")) }, 200),
    )
    .openapi(taskView("/tasks/{id}", "One task's registry entry", "Task", TaskSummary), (c) => {
      const { id } = c.req.valid("param");
      return c.json(found(id, store.get(id)), 200);
    })
    .openapi(
      createRoute({
        method: "put",
        path: "/tasks/{id}/calibration",
        summary: "Record a task's measured base success for one (model, harness)",
        request: {
          params: IdParam,
          body: jsonBody(Calibration),
        },
        responses: {
          200: jsonContent(TaskSummary, "The task with its calibrations"),
          404: errorContent("No such task"),
          409: errorContent("Measured on other content than the task has now"),
        },
      }),
      (c) => {
        const { id } = c.req.valid("param");
        const record = c.req.valid("json");
        const task = found(id, store.get(id));
        if (task.hash !== record.taskHash)
          throw httpError(
            409,
            "task_changed",
            `task '${id}' changed since it was measured; calibrate it again`,
          );
        if (record.successes > record.attempts)
          throw httpError(400, "bad_calibration", "successes exceed attempts");
        store.calibrate(id, record);
        return c.json(store.get(id)!, 200);
      },
    )
    .openapi(
      taskView(
        "/tasks/{id}/agent",
        "What the agent phase gets: instruction and workspace files (never tests or solution)",
        "Agent view",
        AgentTask,
      ),
      (c) => {
        const { id } = c.req.valid("param");
        return c.json(found(id, store.agentTask(id)), 200);
      },
    )
    .openapi(
      taskView(
        "/tasks/{id}/verifier-bundle",
        "For the verifier only: the tests and their timeout",
        "Verifier bundle",
        VerifierBundle,
      ),
      (c) => {
        const { id } = c.req.valid("param");
        return c.json(found(id, store.verifierBundle(id)), 200);
      },
    )
    .openapi(
      createRoute({
        method: "post",
        path: "/tasks/import",
        summary: "Import Harbor task folders from a path on this host, running the controls",
        request: { body: jsonBody(ImportRequest) },
        responses: {
          200: jsonContent(ImportResult, "One verdict per folder"),
          400: errorContent("Bad path"),
        },
      }),
      async (c) => {
        const body = c.req.valid("json");
        let verdicts: ImportResult["verdicts"];
        try {
          verdicts = await importTasks(body.path, {
            store,
            log: c.get("log"),
            heldOutRatio: deps.heldOutRatio,
            parallel: deps.controlParallel,
            runControls: body.runControls,
            controlRepeats: body.controlRepeats,
            sandboxDir: deps.sandboxDir,
            allowedEnv: deps.allowedEnv ?? [],
            toolchain: deps.toolchain,
            images: deps.images,
          });
        } catch (err) {
          throw httpError(400, "invalid_path", (err as Error).message, {
            issues: [{ path: "body.path", message: (err as Error).message }],
          });
        }
        return c.json({ verdicts }, 200);
      },
    )
    .openapi(
      createRoute({
        method: "post",
        path: "/samples",
        summary: "A batch stratified by category, seeded, without replacement within an epoch",
        description:
          "Only tasks of the requested split whose controls passed on their current content are eligible (with `unproven`, also those that passed all but the oracle, which could not run for want of a reference solution). Pass `nextCursor` back for the next batch.",
        request: { body: jsonBody(SampleRequest) },
        responses: {
          200: jsonContent(SampleResult, "Batch"),
          400: errorContent("Invalid request"),
          422: errorContent("No eligible task"),
        },
      }),
      (c) => {
        const body = c.req.valid("json");
        // Checked on their current content, in the categories asked for: read once.
        const checked = store
          .list({ split: body.split })
          .filter((t) => t.controls?.hash === t.hash)
          .filter((t) => !body.categories || body.categories.includes(t.category));
        const eligible = checked
          .filter((t) => t.controls?.passed || (body.unproven && t.controls?.unproven))
          .filter((t) => !body.ids || body.ids.includes(t.id));
        const missing = body.ids?.filter((id) => !eligible.some((t) => t.id === id)) ?? [];
        if (missing.length > 0) {
          throw httpError(
            422,
            "task_not_eligible",
            `not eligible for ${body.split} sampling: ${missing.join(", ")} (unknown, in another split or category, or its controls have not passed${body.unproven ? "" : ", or are unproven: no reference solution"})`,
          );
        }
        if (eligible.length === 0) {
          const unproven = body.unproven ? 0 : checked.filter((t) => t.controls?.unproven).length;
          throw httpError(
            422,
            "no_eligible_tasks",
            `no ${body.split} task${body.categories ? ` in ${body.categories.join(", ")}` : ""} has passed its controls${unproven > 0 ? ` (${unproven} ${unproven === 1 ? "is" : "are"} unproven, with no reference solution: ask for unproven tasks to train on them)` : ""}`,
          );
        }
        return c.json(sampleBatch(eligible, body.size, body.seed, body.cursor), 200);
      },
    );
}
