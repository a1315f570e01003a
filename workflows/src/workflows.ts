/** Every workflow the worker registers. Workflow code must stay deterministic (see biome.json). */
export { evaluation } from "./workflows/evaluation.ts";
export { probeStack } from "./workflows/probe.ts";
export { trainingRun } from "./workflows/training.ts";
