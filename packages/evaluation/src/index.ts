/** Paired adapter-vs-base evaluation statistics and reports (pure, workflow-safe). */
export { renderMarkdown } from "./markdown.ts";
export {
  type MatrixCell,
  renderMatrix,
  type Specialisation,
  specialisation,
} from "./matrix.ts";
export { PoolError, type Pooled, type PooledTask, type PoolRun, poolByTask, renderPooled } from "./pool.ts";
export { buildReport, compare, type ReportInput } from "./report.ts";
export { type Interval, mean, meanInterval, sd, tQuantile975, wilson } from "./stats.ts";
