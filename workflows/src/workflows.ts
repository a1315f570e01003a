/** Every workflow the worker registers. Workflow code must stay deterministic (see biome.json). */
export { calibration } from "./workflows/calibration.ts";
export { evaluation } from "./workflows/evaluation.ts";
export { probeStack } from "./workflows/probe.ts";
export { trainingRun } from "./workflows/training.ts";
