/**
 * Which attempt of a Temporal activity sent a request. The runner and the trainer remember the
 * latest attempt that waits for a rollout or step, so an earlier attempt that timed out cannot
 * cancel what its retry took over.
 */
export const ATTEMPT_HEADER = "x-bridle-attempt";

/** The header an activity's attempt sends. */
export const attemptHeader = (attempt: number) => ({ [ATTEMPT_HEADER]: String(attempt) });

/** The attempt a request names, or `otherwise` when it names none (or a malformed one). */
export function attemptOf(header: string | undefined, otherwise: number): number {
  const n = Number(header);
  return header !== undefined && Number.isInteger(n) && n >= 0 ? n : otherwise;
}
