/**
 * A sampling seed from a run's seed and a rollout's identity (FNV-1a over the text): the same
 * rollout of a rerun samples with the same seed, and different rollouts with different ones.
 * Deterministic and free of Node built-ins, as workflow code must be.
 */
export function rolloutSeed(seed: number, identity: string): number {
  let hash = 0x811c9dc5 ^ seed;
  for (let i = 0; i < identity.length; i++) {
    hash ^= identity.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % 2 ** 31;
}
