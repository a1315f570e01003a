/** The benchmark's one table: each figure beside its same-run baseline, the ratio and its target. */

export interface Row {
  figure: string;
  value: string;
  baseline: string;
  ratio: string;
  target: string;
  met: string;
}

/** A target on the ratio to the baseline (the default) or on the value itself. */
export interface Target {
  min: number;
  on?: "ratio" | "value";
}

const DASH = "-";

const format = (n: number, unit: string) => {
  const digits = unit === "%" || n < 100 ? 1 : 0;
  return `${n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })}${unit === "%" ? "%" : ` ${unit}`}`;
};

/** One figure; without a baseline it is context for the others (the ceiling, the bandwidths). */
export function row(
  figure: string,
  value: number,
  unit: string,
  baseline?: { value: number; label: string },
  target?: Target,
): Row {
  const ratio = baseline && baseline.value > 0 ? value / baseline.value : undefined;
  const on = target?.on ?? "ratio";
  const checked = on === "value" ? value : ratio;
  return {
    figure,
    value: format(value, unit),
    baseline: baseline ? `${format(baseline.value, unit)} (${baseline.label})` : DASH,
    ratio: ratio === undefined ? DASH : `${ratio.toFixed(2)}x`,
    target: target ? `${on} >= ${on === "value" ? format(target.min, unit) : `${target.min}x`}` : DASH,
    met: target === undefined || checked === undefined ? DASH : checked >= target.min ? "yes" : "no",
  };
}

export function printTable(rows: Row[]): void {
  const columns: { key: keyof Row; title: string }[] = [
    { key: "figure", title: "figure" },
    { key: "value", title: "value" },
    { key: "baseline", title: "baseline" },
    { key: "ratio", title: "ratio" },
    { key: "target", title: "target" },
    { key: "met", title: "met" },
  ];
  const widths = columns.map(({ key, title }) => Math.max(title.length, ...rows.map((r) => r[key].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  console.log("\nServing benchmark (vLLM CPU, the stack's flags; ratios are to a baseline of the same run)");
  console.log(line(columns.map((c) => c.title)));
  console.log(line(widths.map((w) => "-".repeat(w))));
  for (const r of rows) console.log(line(columns.map((c) => r[c.key])));
}
