import { CheckContext, CheckLine, type CheckResult } from "@bridle/contracts";
import { checkToolCall } from "./engine.ts";

/**
 * Judges one line of a `calls.jsonl` audit file. Never throws: a line that is not JSON, or does not
 * match the check-line contract, gives an `error` result naming what is wrong.
 */
export function auditLine(line: string): CheckResult {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch (err) {
    return { id: null, decision: "error", reason: `not valid JSON: ${(err as Error).message}` };
  }
  const id = idOf(json);
  const parsed = CheckLine.safeParse(json);
  if (!parsed.success) {
    const reason = parsed.error.issues
      .map((i) => `${i.path.length > 0 ? i.path.join(".") : "(line)"}: ${i.message}`)
      .join("; ");
    return { id, decision: "error", reason };
  }
  const input = parsed.data;
  const context = CheckContext.parse({
    instruction: input.instruction,
    declaredTools: input.declared_tools,
    allowedHosts: input.allowed_hosts ?? [],
    history: input.history ?? [],
    ...(input.task_plugins ? { taskPlugins: input.task_plugins } : {}),
  });
  const verdict = checkToolCall({ name: input.tool, arguments: input.arguments }, context);
  return {
    id: input.id,
    decision: verdict.decision,
    ...(verdict.rule ? { rule: verdict.rule } : {}),
    ...(verdict.notice ? { notice: verdict.notice } : {}),
  };
}

/** Judges every non-blank line; blank lines are skipped, all others give exactly one result. */
export function auditLines(text: string): CheckResult[] {
  return text
    .split("\n")
    .filter((l) => l.trim().length > 0)
    .map(auditLine);
}

function idOf(json: unknown): string | number | null {
  if (typeof json !== "object" || json === null) return null;
  const id = (json as { id?: unknown }).id;
  return typeof id === "string" || typeof id === "number" ? id : null;
}
