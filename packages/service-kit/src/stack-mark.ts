/**
 * The variable every process of one stack carries: the stack's data folder. The supervisor sets it
 * on each component; children inherit it, and the few spawns that build an environment of their
 * own (the trainer's worker, a sandbox's outer process) copy it, so that `bridle down` and the
 * test suite can find any process of the stack that outlived its parent.
 */
export const STACK_MARK = "BRIDLE_STACK_ID";

/** The stack mark of this process, as an environment to add to a child's. */
export function stackMarkEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const value = env[STACK_MARK];
  return value ? { [STACK_MARK]: value } : {};
}
