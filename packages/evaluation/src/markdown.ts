import type { Comparison, EvalReport } from "@bridle/contracts";

const pct = (x: number | null) => (x !== null && Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : "n/a");
const pts = (x: number | null) =>
  x !== null && Number.isFinite(x) ? `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}` : "n/a";
const num = (x: number | null) => (x === null ? "n/a" : x.toFixed(2));

const rules = (byRule: Record<string, number>) =>
  Object.keys(byRule).length === 0
    ? "none"
    : Object.entries(byRule)
        .sort()
        .map(([rule, n]) => `${rule} ${n}`)
        .join(", ");

function diff(c: Comparison): string {
  const d = c.difference;
  return `${pts(d.estimate)} pts [${pts(d.low)}, ${pts(d.high)}]`;
}

/** The report as Markdown, for people: the same numbers as the JSON. */
export function renderMarkdown(report: EvalReport): string {
  const o = report.overall;
  const lines = [
    `# Evaluation: ${report.candidate} vs ${report.baseline}`,
    "",
    `Harness **${report.harness}**, ${report.attemptsPerTask} attempt(s) per task at temperature ${report.temperature}, ${o.tasks} paired task(s).`,
    "",
    "| | candidate | baseline |",
    "| --- | --- | --- |",
    `| success rate (95% CI) | ${pct(o.candidate.successRate.estimate)} [${pct(o.candidate.successRate.low)}, ${pct(o.candidate.successRate.high)}] | ${pct(o.baseline.successRate.estimate)} [${pct(o.baseline.successRate.low)}, ${pct(o.baseline.successRate.high)}] |`,
    `| solved / attempts | ${o.candidate.solved} / ${o.candidate.attempts} | ${o.baseline.solved} / ${o.baseline.attempts} |`,
    `| tool calls per solved attempt | ${num(o.candidate.toolCallsPerSolved)} | ${num(o.baseline.toolCallsPerSolved)} |`,
    `| tool calls on the ${o.bothSolved.tasks} task(s) both solved | ${num(o.bothSolved.candidateToolCalls)} | ${num(o.bothSolved.baselineToolCalls)} |`,
    `| hack rate: attempts with a blocked call or a hack-check pass (95% CI) | ${pct(o.candidate.hackRate.estimate)} [${pct(o.candidate.hackRate.low)}, ${pct(o.candidate.hackRate.high)}] | ${pct(o.baseline.hackRate.estimate)} [${pct(o.baseline.hackRate.low)}, ${pct(o.baseline.hackRate.high)}] |`,
    `| blocked calls by rule | ${rules(o.candidate.blockedByRule)} | ${rules(o.baseline.blockedByRule)} |`,
    `| passes of the ${o.hackChecks.tasks} hack-check task(s) (no honest solution passes) | ${o.hackChecks.candidatePasses} | ${o.hackChecks.baselinePasses} |`,
    "",
    `Paired difference in success rate: **${diff(o)}**.`,
    "",
    `Paired difference in hack rate: ${pts(o.hackDifference.estimate)} pts [${pts(o.hackDifference.low)}, ${pts(o.hackDifference.high)}]${o.hackRateRose ? ": **the candidate's hack rate rose**" : ""}.`,
    "",
    ...verdictLines(report),
    "## By category",
    "",
    "| category | tasks | candidate | baseline | difference (95% CI) | calls/solved both (cand / base) |",
    "| --- | --- | --- | --- | --- | --- |",
    ...report.categories.map(
      (c) =>
        `| ${c.category} | ${c.tasks} | ${pct(c.candidate.successRate.estimate)} | ${pct(c.baseline.successRate.estimate)} | ${diff(c)} | ${num(c.bothSolved.candidateToolCalls)} / ${num(c.bothSolved.baselineToolCalls)} |`,
    ),
    "",
    ...taskLines(report),
    ...rewardKeyLines(report),
    `## Environment failures (${report.environmentFailures.length}, excluded from the figures)`,
    "",
    ...(report.environmentFailures.length === 0
      ? ["None."]
      : report.environmentFailures.map(
          (f) =>
            `- ${f.taskId} (${f.arm}, attempt ${f.attempt}, rollout ${f.rolloutId}): ${f.failure ?? "unknown"}`,
        )),
    "",
    "## Served by",
    "",
    ...[
      ...new Set(
        report.servedBy.map(
          (s) =>
            `${s.arm}: ${s.servedBy.model}${s.servedBy.hash ? ` (hash ${s.servedBy.hash.slice(0, 12)})` : ""}`,
        ),
      ),
    ].map((l) => `- ${l}`),
    "",
  ];
  return lines.join("\n");
}

/** The promotion gate's decision and each of its checks. */
function verdictLines(report: EvalReport): string[] {
  const v = report.verdict;
  if (!v) return [];
  return [
    `Promotion gate (margin ${pts(v.margin)} pts): **${v.decision === "promote" ? "promote the candidate" : "keep the baseline"}**.`,
    "",
    ...v.reasons.map((r) => `- ${r}`),
    "",
  ];
}

/** The reward.json keys' means, when the tasks wrote several-key rewards. */
function rewardKeyLines(report: EvalReport): string[] {
  const keys = Object.entries(report.rewardKeys ?? {});
  if (keys.length === 0) return [];
  return [
    "## Reward keys (reward.json, mean over valid attempts)",
    "",
    "| key | candidate | baseline |",
    "| --- | --- | --- |",
    ...keys.map(([key, m]) => `| ${key} | ${num(m.candidate)} | ${num(m.baseline)} |`),
    "",
  ];
}

/** Each task's solved attempts per arm: what the paired interval is computed over. */
function taskLines(report: EvalReport): string[] {
  const tasks = report.byTask ?? [];
  if (tasks.length === 0) return [];
  return [
    "## By task",
    "",
    "| task | category | candidate solved | baseline solved |",
    "| --- | --- | --- | --- |",
    ...tasks.map(
      (t) =>
        `| ${t.taskId}${t.impossible ? " (hack check)" : ""}${t.unproven ? " (unproven)" : ""} | ${t.category} | ${t.candidate.solved} / ${t.candidate.attempts} | ${t.baseline.solved} / ${t.baseline.attempts} |`,
    ),
    "",
  ];
}
