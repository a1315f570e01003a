import { adapterHarness, type EvalReport } from "@bridle/contracts";

/** One cell of the cross-harness matrix: a candidate against the base model on one harness. */
export interface MatrixCell {
  candidate: string;
  harness: string;
  report: EvalReport;
}

/** What one adapter's row says about specialisation: its own harness against the others. */
export interface Specialisation {
  candidate: string;
  /** The harness it was trained in, read from its served name (`<base>/<harness>/<run>@v<N>`). */
  trainedOn: string;
  /** Paired difference vs base on its own harness; null when that cell has no paired task. */
  diagonal: number | null;
  /** Mean paired difference vs base on the other harnesses; null when there are none. */
  offDiagonal: number | null;
  /** True when the diagonal beats the off-diagonal mean; null when either is missing. */
  pays: boolean | null;
}

/** Each candidate's diagonal (its own harness) against its off-diagonal cells. */
export function specialisation(cells: MatrixCell[]): Specialisation[] {
  const candidates = [...new Set(cells.map((c) => c.candidate))];
  return candidates.flatMap((candidate) => {
    const trainedOn = adapterHarness(candidate);
    const row = cells.filter((c) => c.candidate === candidate);
    if (!trainedOn || !row.some((c) => c.harness === trainedOn)) return [];
    const estimate = (c: MatrixCell) => c.report.overall.difference.estimate;
    const diagonal = estimate(row.find((c) => c.harness === trainedOn)!);
    const others = row
      .filter((c) => c.harness !== trainedOn)
      .map(estimate)
      .filter((x): x is number => x !== null);
    const offDiagonal = others.length > 0 ? others.reduce((a, b) => a + b, 0) / others.length : null;
    const pays = diagonal === null || offDiagonal === null ? null : diagonal > offDiagonal;
    return [{ candidate, trainedOn, diagonal, offDiagonal, pays }];
  });
}

const pct = (x: number | null) => (x !== null && Number.isFinite(x) ? `${(100 * x).toFixed(0)}%` : "n/a");
const pts = (x: number | null) =>
  x !== null && Number.isFinite(x) ? `${x >= 0 ? "+" : ""}${(100 * x).toFixed(0)}` : "n/a";
const calls = (x: number | null) => (x === null ? "n/a" : x.toFixed(1));

/**
 * The N x N table as Markdown: a row per candidate (and the base model's own row), a column per
 * harness; a candidate's cell is its success rate, its paired difference from the base model on
 * that harness with the 95% interval, and tool calls per solved attempt. `*` marks the harness an
 * adapter was trained in, so the diagonal reads at a glance.
 */
export function renderMatrix(cells: MatrixCell[], meta: { seed: number; tasks: string[] }): string {
  const harnesses = [...new Set(cells.map((c) => c.harness))];
  const candidates = [...new Set(cells.map((c) => c.candidate))];
  const cell = (candidate: string, harness: string) =>
    cells.find((c) => c.candidate === candidate && c.harness === harness);
  const first = cells[0]?.report;
  const base = first?.baseline ?? "base";
  const lines = [
    `# Cross-harness matrix: each adapter and ${base} on ${harnesses.join(", ")}`,
    "",
    `${meta.tasks.length} held-out task(s) (${meta.tasks.join(", ")}), ${first?.attemptsPerTask ?? 0} attempt(s) each at temperature ${first?.temperature ?? "n/a"}, seed ${meta.seed}; every cell is paired with ${base} on the same tasks, attempts and seeds in the same harness.`,
    "",
    "Cell: success rate, paired difference from the base model in points [95% CI], tool calls per solved attempt. `*`: the harness the adapter was trained in.",
    "",
    `| adapter \\ evaluated on | ${harnesses.join(" | ")} |`,
    `| --- | ${harnesses.map(() => "---").join(" | ")} |`,
    `| ${base} (base) | ${harnesses
      .map((h) => {
        const any = cells.find((c) => c.harness === h)?.report.overall.baseline;
        return any
          ? `${pct(any.successRate.estimate)} (${any.solved}/${any.attempts}), ${calls(any.toolCallsPerSolved)} calls`
          : "n/a";
      })
      .join(" | ")} |`,
    ...candidates.map((candidate) => {
      const trainedOn = adapterHarness(candidate);
      return `| ${candidate} | ${harnesses
        .map((h) => {
          const c = cell(candidate, h);
          if (!c) return "not run";
          const o = c.report.overall;
          const d = o.difference;
          return `${h === trainedOn ? "* " : ""}${pct(o.candidate.successRate.estimate)} (${pts(d.estimate)} [${pts(d.low)}, ${pts(d.high)}]), ${calls(o.candidate.toolCallsPerSolved)} calls`;
        })
        .join(" | ")} |`;
    }),
    "",
  ];
  const verdicts = specialisation(cells);
  if (verdicts.length === 0)
    lines.push("No adapter was evaluated in the harness it was trained in: the diagonal is empty.");
  for (const v of verdicts) {
    const says =
      v.pays === null
        ? "cannot tell (a cell has no paired task)"
        : v.pays
          ? "specialisation pays: it gains more over the base model in its own harness than in the others"
          : "specialisation does not show: it gains no more in its own harness than in the others";
    lines.push(
      `- ${v.candidate} (trained in ${v.trainedOn}): ${pts(v.diagonal)} pts in ${v.trainedOn}, ${pts(v.offDiagonal)} pts elsewhere on average: ${says}.`,
    );
  }
  lines.push(
    "",
    "Point estimates only decide the verdict line; where the intervals overlap, the difference is not established.",
  );
  return `${lines.join("\n")}\n`;
}
