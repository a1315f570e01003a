import type { EvalOutcome } from "@bridle/contracts";
import { describe, expect, it } from "vitest";
import { type MatrixCell, renderMatrix, specialisation } from "./matrix.ts";
import { buildReport } from "./report.ts";

/** A cell whose candidate solves `cand` of four tasks and the base `base` of the same four. */
function cell(candidate: string, harness: string, cand: number, base: number): MatrixCell {
  const outcomes: EvalOutcome[] = ["t1", "t2", "t3", "t4"].flatMap((taskId, i) =>
    (["candidate", "baseline"] as const).map((arm) => ({
      rolloutId: `${candidate}/${harness}/${taskId}/${arm}`,
      taskId,
      category: "build",
      arm,
      attempt: 0,
      correct: i < (arm === "candidate" ? cand : base),
      toolCalls: 3,
      blocked: [],
      servedBy: { model: arm === "candidate" ? candidate : "m", version: null, hash: null },
      impossible: false,
    })),
  );
  const report = buildReport({
    candidate,
    baseline: "m",
    harness,
    attemptsPerTask: 1,
    temperature: 0.7,
    outcomes,
  });
  return { candidate, harness, report };
}

describe("the cross-harness matrix", () => {
  it("says specialisation pays when each adapter gains most in its own harness, and when it does not", () => {
    const cells = [
      cell("m/pi/a@v2", "pi", 3, 1), // +50 in its own harness
      cell("m/pi/a@v2", "opencode", 2, 2), // +0 elsewhere
      cell("m/opencode/b@v1", "pi", 2, 1), // +25 elsewhere
      cell("m/opencode/b@v1", "opencode", 2, 2), // +0 in its own harness
    ];
    expect(specialisation(cells)).toEqual([
      { candidate: "m/pi/a@v2", trainedOn: "pi", diagonal: 0.5, offDiagonal: 0, pays: true },
      { candidate: "m/opencode/b@v1", trainedOn: "opencode", diagonal: 0, offDiagonal: 0.25, pays: false },
    ]);
    const table = renderMatrix(cells, { seed: 7, tasks: ["t1", "t2", "t3", "t4"] });
    expect(table).toContain("| adapter \\ evaluated on | pi | opencode |");
    expect(table).toContain("| m (base) | 25% (1/4), 3.0 calls | 50% (2/4), 3.0 calls |");
    expect(table).toMatch(
      /\| m\/pi\/a@v2 \| \* 75% \(\+50 \[[^\]]+\]\), 3\.0 calls \| 50% \(\+0 \[[^\]]+\]\), 3\.0 calls \|/,
    );
    expect(table).toContain(
      "m/pi/a@v2 (trained in pi): +50 pts in pi, +0 pts elsewhere on average: specialisation pays",
    );
    expect(table).toContain(
      "m/opencode/b@v1 (trained in opencode): +0 pts in opencode, +25 pts elsewhere on average: specialisation does not show",
    );
    expect(table).toContain("seed 7");
  });
});
