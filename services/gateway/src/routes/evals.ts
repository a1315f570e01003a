import { CalibrationConfig, CalibrationOutput, EvalConfig, EvalOutput } from "@bridle/contracts";
import { type JobDeps, jobRoutes } from "./jobs.ts";

/** Evaluations: adapter vs base (or two versions) on held-out tasks, started over HTTP. */
export const evalRoutes = (deps: JobDeps) =>
  jobRoutes(
    {
      noun: "evaluation",
      workflowType: "evaluation",
      prefix: "eval",
      config: EvalConfig,
      output: EvalOutput,
      summary: (c) =>
        `Evaluate ${c.candidate} vs ${c.baseline} with ${c.harness}, ${c.attempts} attempt(s) per task`,
    },
    deps,
  );

/** Calibrations: k rollouts of the base model per task, each task's success into the registry. */
export const calibrationRoutes = (deps: JobDeps) =>
  jobRoutes(
    {
      noun: "calibration",
      workflowType: "calibration",
      prefix: "calibration",
      config: CalibrationConfig,
      output: CalibrationOutput,
      summary: (c) =>
        `Calibrate ${c.tasks.length} task(s): ${c.attempts} rollouts each of ${c.model} with ${c.harness} at temperature ${c.temperature}`,
    },
    deps,
  );
