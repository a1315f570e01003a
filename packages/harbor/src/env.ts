/**
 * `${VAR}` and `${VAR:-default}` in a task's env values (Harbor's `[verifier] env`), resolved only
 * from the variables the user allows by name, never from the rest of Bridle's environment, so no
 * secret of the stack reaches a sandbox by accident.
 */
const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** The variables an env table reads, sorted. */
export function envReferences(env: Record<string, string>): string[] {
  const names = new Set<string>();
  for (const value of Object.values(env)) for (const m of value.matchAll(REFERENCE)) names.add(m[1]!);
  return [...names].sort();
}

/**
 * Resolves every reference in `env` from `source`, reading only the names in `allowed`. A reference
 * to a name that is not allowed, or allowed but unset with no default, is an error naming it.
 */
export function resolveTaskEnv(
  env: Record<string, string>,
  allowed: readonly string[],
  source: Record<string, string | undefined>,
): { ok: true; env: Record<string, string> } | { ok: false; problem: string } {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    let problem: string | undefined;
    out[key] = value.replace(REFERENCE, (_, name: string, fallback: string | undefined) => {
      const set = allowed.includes(name) ? source[name] : undefined;
      if (set !== undefined) return set;
      if (fallback !== undefined) return fallback;
      problem ??= allowed.includes(name)
        ? `env ${key} reads \${${name}}, which is not set`
        : `env ${key} reads \${${name}}, which the task may not read: allow it by name in BRIDLE_TASK_ENV_ALLOW`;
      return "";
    });
    if (problem) return { ok: false, problem };
  }
  return { ok: true, env: out };
}
