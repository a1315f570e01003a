/** Names and types the gateway needs to start and read Bridle's workflows. */
export type { Activities } from "./activities.ts";
export type { evaluation, probeStack, trainingRun } from "./workflows/index.ts";
