/** Harbor-format tasks: loading and checking folders, the verifier phase, and the controls. */

export type { TaskService } from "./compose.ts";
export {
  controlProblems,
  NO_SOLUTION,
  prepareStep,
  runControls,
  sandboxFor,
  sandboxForAgent,
} from "./controls.ts";
export { envReferences, resolveTaskEnv } from "./env.ts";
export { fromTaskFiles, hashTree, readTree, type TreeFile, writeTree } from "./files.ts";
export { imagesFromTasks, type SandboxHost } from "./host.ts";
export { type TaskImage, taskImage } from "./image.ts";
export { labelsFromControls, recordLabels } from "./labels.ts";
export {
  findTaskDirs,
  type HarborStep,
  type HarborTask,
  type LoadResult,
  loadTask,
  taskIdOf,
} from "./load.ts";
export { startTaskServices } from "./services.ts";
export { splitFor } from "./split.ts";
export { belowMinReward, rollUpSteps, type StepScore } from "./steps.ts";
export { labelsOf, mcpServersOf, parseTaskToml, phaseEnv, TaskToml } from "./task-toml.ts";
export { type ValidateOptions, validateFolder, validateTask } from "./validate.ts";
export { chownTree, runTests, type TestRunOptions, TOOLCHAIN_DIR } from "./verify.ts";
