/** Every workflow the worker registers. Workflow code must stay deterministic (see biome.json). */
export { calibration } from "./calibration.ts";
export { evaluation } from "./evaluation.ts";
export { promotion, rollback } from "./lineage.ts";
export { probeStack } from "./probe.ts";
export { trainingRun } from "./training.ts";
