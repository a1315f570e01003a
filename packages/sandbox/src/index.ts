/** bubblewrap sandboxes for rollouts and verification (used by the runner and the verifier). */
export { packFolder, unpackFolder } from "./archive.ts";
export { Cgroup, cgroupControllers, processAlive } from "./cgroup.ts";
export { missingTools, SANDBOX_PATH } from "./host.ts";
export {
  BASE_IMAGE,
  type BuiltImage,
  dockerfileInstructions,
  EnvironmentImages,
  ImageBuildError,
  imageCacheBytes,
  imageWorkspace,
  planDockerfile,
} from "./images.ts";
export { SharedNetwork } from "./network.ts";
export {
  defaultLimits,
  GUARD_SOCKET,
  type GuardPath,
  type Mount,
  type Orphans,
  type RunOptions,
  type RunResult,
  Sandbox,
  type SandboxImage,
  SandboxSetupError,
  WORKSPACE,
  workdirProblem,
} from "./sandbox.ts";
export { type ServiceSpec, ServiceStartError, TaskServices } from "./services.ts";
