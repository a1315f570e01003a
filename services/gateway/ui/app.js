// Bridle's dashboard: runs with live curves, evaluation reports, adapters. Reads the gateway's API
// with the bearer token given in the address (#token=...) or typed in, kept for this tab only.

const REFRESH_MS = 3000;
const TOKEN_KEY = "bridle-api-token";

/** The curves of a run, each from one field of its per-step metrics. */
const CHARTS = [
  {
    id: "reward",
    title: "Reward and success rate",
    series: [
      ["meanReward", "mean reward"],
      ["successRate", "success rate"],
    ],
  },
  {
    id: "calls",
    title: "Tool calls",
    series: [
      ["meanToolCalls", "per rollout"],
      ["toolCallsPerSolved", "per solved task"],
    ],
  },
  { id: "loss", title: "GRPO loss", series: [["loss", "loss"]] },
  {
    id: "kl",
    title: "KL to the base model and clip fraction",
    series: [
      ["kl", "KL"],
      ["clipFraction", "clip fraction"],
    ],
  },
];
const COLORS = ["#2f6fde", "#12805c", "#c4320a", "#7a5af8", "#b54708", "#0e9384"];

const state = { token: null, run: null, evalId: null, charts: new Map(), timer: null };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  return node;
}

function setStatus(text, isError = false) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

class Unauthorized extends Error {}

async function api(path) {
  const response = await fetch(`/v1${path}`, { headers: { authorization: `Bearer ${state.token}` } });
  if (response.status === 401) throw new Unauthorized("the API token was refused");
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new Error(body?.error?.message ?? `${path}: HTTP ${response.status}`);
  return body;
}

const pct = (x) => (x === null || x === undefined ? "–" : `${(100 * x).toFixed(1)}%`);
const num = (x, digits = 2) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));
const when = (iso) => (iso ? new Date(iso).toLocaleString() : "–");
const points = (x) => (x === null || x === undefined ? "–" : `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}`);

function link(url, text) {
  return el("a", { href: url, target: "_blank", rel: "noopener" }, text);
}

function fillTable(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows);
}

/**
 * A row of a workflow list (a run, an evaluation) that picks it when clicked: its id, status, start
 * and Temporal UI link; `data-<kind>` names it for the tests.
 */
function workflowRow(kind, id, workflow, chosen, pick) {
  return el(
    "tr",
    { class: `pick${chosen ? " chosen" : ""}`, [`data-${kind}`]: id, onclick: pick },
    el("td", {}, id),
    el("td", {}, workflow.status),
    el("td", {}, when(workflow.startedAt)),
    el("td", {}, link(workflow.uiUrl, "Temporal UI")),
  );
}

// ---- runs

async function showRuns() {
  const { runs } = await api("/runs");
  const rows = runs.map((run) =>
    workflowRow("run", run.name, run, run.name === state.run, () => chooseRun(run.name)),
  );
  fillTable(
    "runs",
    rows.length ? rows : [el("tr", {}, el("td", { colspan: 4 }, "No runs yet: bridle train"))],
  );
}

function chooseRun(name) {
  state.run = name;
  for (const chart of state.charts.values()) chart.plot?.destroy();
  state.charts.clear();
  document.getElementById("charts").replaceChildren();
  history.replaceState(null, "", `#run=${encodeURIComponent(name)}`);
  void refresh();
}

/** The series of each chart: fixed ones, and success per task category (as many as the run has). */
function chartSpecs(metrics) {
  const categories = [...new Set(metrics.flatMap((m) => Object.keys(m.categories ?? {})))].sort();
  const perCategory = {
    id: "categories",
    title: "Success rate by task category",
    series: categories.map((c) => [(m) => m.categories?.[c]?.successRate ?? null, c]),
  };
  return categories.length > 0 ? [...CHARTS, perCategory] : CHARTS;
}

function drawChart(spec, metrics) {
  const x = metrics.map((m) => m.step);
  const value = (field, m) => (typeof field === "function" ? field(m) : (m[field] ?? null));
  const data = [x, ...spec.series.map(([field]) => metrics.map((m) => value(field, m)))];
  const key = `${spec.id}:${spec.series.map(([, label]) => label).join(",")}`;
  let chart = state.charts.get(spec.id);
  if (chart && chart.key !== key) {
    chart.plot?.destroy();
    chart.box.remove();
    chart = undefined;
  }
  if (!chart) {
    const box = el("div", { class: "chart", "data-chart": spec.id }, el("h3", {}, spec.title));
    document.getElementById("charts").append(box);
    chart = { key, box, plot: null };
    state.charts.set(spec.id, chart);
  }
  chart.box.setAttribute("data-points", String(x.length));
  if (x.length === 0) {
    if (!chart.box.querySelector(".empty")) chart.box.append(el("div", { class: "empty" }, "No step yet"));
    return;
  }
  chart.box.querySelector(".empty")?.remove();
  if (chart.plot) {
    chart.plot.setData(data);
    return;
  }
  chart.plot = new uPlot(
    {
      width: Math.max(320, chart.box.clientWidth),
      height: 200,
      scales: {
        x: { time: false },
        // From 0 (or below, for a negative loss) to a little above the highest point; 0 to 1 when flat at 0.
        y: { range: (_u, min, max) => [Math.min(0, min ?? 0), max > 0 ? max * 1.1 : 1] },
      },
      // Steps are whole numbers.
      axes: [{ label: "step", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] }, {}],
      series: [
        { label: "step" },
        ...spec.series.map(([, label], i) => ({
          label,
          stroke: COLORS[i % COLORS.length],
          width: 2,
          points: { show: true, size: 5 },
          spanGaps: false,
        })),
      ],
    },
    data,
    chart.box,
  );
}

async function showRun() {
  const section = document.getElementById("run");
  if (!state.run) {
    section.hidden = true;
    return;
  }
  const path = `/runs/${encodeURIComponent(state.run)}`;
  // One request: the figures come with the run's view they were read with (one progress query).
  const figures = await api(`${path}/metrics`);
  const { run } = figures;
  section.hidden = false;
  const p = run.progress;
  document.getElementById("run-title").replaceChildren(`Run ${run.name} `, link(run.uiUrl, "(workflow)"));
  const facts = [
    ["status", run.status],
    ["phase", p?.phase ?? "–"],
    ["steps", p ? `${p.step} of ${p.steps}` : "–"],
    ["adapter", p ? `${p.adapter} (v${p.adapterVersion})` : "–"],
    ["samples from", p?.servedName ?? "–"],
    ["started from", p ? (p.parent?.servedName ?? "a fresh adapter") : "–"],
  ];
  document
    .getElementById("run-facts")
    .replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v)]));
  const failure = document.getElementById("run-failure");
  failure.hidden = !run.failure;
  failure.textContent = run.failure ?? "";
  // Every step the trainer kept (the run's view carries only its latest).
  const metrics = figures.metrics;
  for (const spec of chartSpecs(metrics)) drawChart(spec, metrics);
}

// ---- evaluations

function ciBar(interval) {
  const width = 160;
  const height = 14;
  const at = (v) => ((Math.max(-1, Math.min(1, v)) + 1) / 2) * width;
  const bar = svg("svg", { class: "ci", width, height, viewBox: `0 0 ${width} ${height}` });
  bar.append(svg("line", { class: "zero", x1: at(0), x2: at(0), y1: 0, y2: height }));
  if (interval.low !== null && interval.high !== null)
    bar.append(svg("line", { class: "range", x1: at(interval.low), x2: at(interval.high), y1: 7, y2: 7 }));
  if (interval.estimate !== null)
    bar.append(svg("circle", { class: "point", cx: at(interval.estimate), cy: 7, r: 3.5 }));
  const text =
    interval.estimate === null
      ? "–"
      : `${points(interval.estimate)} pts [${points(interval.low)}, ${points(interval.high)}]`;
  const direction = interval.low > 0 ? "up" : interval.high < 0 ? "down" : "";
  return el("span", {}, bar, " ", el("span", { class: direction }, text));
}

function armCell(arm) {
  return `${arm.solved}/${arm.attempts} (${pct(arm.successRate.estimate)})`;
}

function comparisonRow(label, c) {
  return el(
    "tr",
    {},
    el("td", {}, label),
    el("td", {}, c.tasks),
    el("td", {}, armCell(c.candidate)),
    el("td", {}, armCell(c.baseline)),
    el("td", { "data-ci": label }, ciBar(c.difference)),
    el("td", {}, `${num(c.candidate.toolCallsPerSolved, 1)} / ${num(c.baseline.toolCallsPerSolved, 1)}`),
    el("td", {}, `${pct(c.candidate.hackRate.estimate)} / ${pct(c.baseline.hackRate.estimate)}`),
  );
}

function hackRules(overall) {
  const rules = [
    ...new Set([
      ...Object.keys(overall.candidate.blockedByRule),
      ...Object.keys(overall.baseline.blockedByRule),
    ]),
  ].sort();
  if (rules.length === 0) return el("p", {}, "No call was blocked in either arm.");
  const rate = (arm, rule) => {
    const n = arm.blockedByRule[rule] ?? 0;
    return `${n} (${pct(arm.attempts ? n / arm.attempts : null)} of attempts)`;
  };
  return el(
    "table",
    { class: "rules" },
    el(
      "thead",
      {},
      el("tr", {}, el("th", {}, "Guard rule"), el("th", {}, "Candidate"), el("th", {}, "Baseline")),
    ),
    el(
      "tbody",
      {},
      rules.map((rule) =>
        el(
          "tr",
          {},
          el("td", {}, rule),
          el("td", {}, rate(overall.candidate, rule)),
          el("td", {}, rate(overall.baseline, rule)),
        ),
      ),
    ),
  );
}

function verdictBox(verdict) {
  if (!verdict) return el("p", {}, "No promotion verdict (a report from before the gate).");
  const promote = verdict.decision === "promote";
  return el(
    "div",
    { class: "verdict", "data-verdict": verdict.decision },
    el(
      "p",
      {},
      el("strong", { class: promote ? "up" : "" }, promote ? "Promote the candidate" : "Keep the baseline"),
      ` (promotion gate, non-inferiority margin ${points(verdict.margin)} pts)`,
    ),
    el(
      "ul",
      {},
      verdict.reasons.map((reason) => el("li", {}, reason)),
    ),
  );
}

async function showEvals() {
  const { jobs } = await api("/evals");
  const pick = (id) => () => {
    state.evalId = id;
    void refresh();
  };
  fillTable(
    "evals",
    jobs.map((job) => workflowRow("eval", job.id, job, job.id === state.evalId, pick(job.id))),
  );
  const box = document.getElementById("report");
  if (!state.evalId) {
    box.hidden = true;
    return;
  }
  const job = await api(`/evals/${encodeURIComponent(state.evalId)}`);
  box.hidden = false;
  if (!job.output) {
    const progress = job.progress ? ` (${job.progress.done} of ${job.progress.total} rollouts)` : "";
    box.replaceChildren(el("h3", {}, `Evaluation ${job.id}: ${job.status}${progress}`), job.failure ?? "");
    return;
  }
  const r = job.output.report;
  box.replaceChildren(
    el("h3", {}, `Evaluation ${job.id}: ${r.candidate} against ${r.baseline}`),
    el(
      "p",
      {},
      `${r.harness}, ${r.attemptsPerTask} attempt(s) per task at temperature ${r.temperature}; ` +
        `${r.environmentFailures.length} environment failure(s) excluded. Difference: candidate minus baseline success, ` +
        "paired by task, 95% interval; tool calls per solved task and hack rate as candidate / baseline.",
    ),
    el(
      "table",
      { class: "report" },
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ["Tasks", "n", "Candidate", "Baseline", "Difference", "Calls per solved", "Hack rate"].map((h) =>
            el("th", {}, h),
          ),
        ),
      ),
      el(
        "tbody",
        {},
        comparisonRow("overall", r.overall),
        r.categories.map((c) => comparisonRow(c.category, c)),
      ),
    ),
    verdictBox(r.verdict),
    el("h3", {}, "Blocked calls by guard rule"),
    hackRules(r.overall),
  );
}

// ---- adapters

async function showAdapters() {
  const { adapters, lineages = [] } = await api("/adapters");
  const promoted = new Set(lineages.flatMap((l) => (l.promoted ? [l.promoted.servedName] : [])));
  const served = (ref) => (ref ? `${ref.name}@v${ref.version}` : "base model");
  const rows = adapters.flatMap((a) =>
    a.versions.map((v) =>
      el(
        "tr",
        { "data-adapter": v.servedName, "data-promoted": promoted.has(v.servedName) ? "true" : undefined },
        el("td", {}, a.name),
        el(
          "td",
          {},
          `v${v.version}${a.current === v.version ? " (current)" : ""}`,
          promoted.has(v.servedName) ? el("span", { class: "badge" }, "promoted") : null,
        ),
        el("td", {}, v.state),
        el("td", {}, v.step ?? "–"),
        el("td", {}, v.parent ? served(v.parent) : "fresh"),
        el("td", {}, el("code", {}, v.hash.slice(0, 12))),
        el("td", {}, num(v.canaryDelta, 3)),
        el("td", {}, when(v.createdAt)),
      ),
    ),
  );
  fillTable("adapters", rows.length ? rows : [el("tr", {}, el("td", { colspan: 8 }, "No adapter yet"))]);
  // Each lineage: what is promoted now, and every decision with the evaluation behind it.
  document.getElementById("lineages").replaceChildren(
    ...lineages.map((l) =>
      el(
        "div",
        { class: "lineage", "data-lineage": `${l.model}/${l.harness}` },
        el(
          "h3",
          {},
          `${l.model} in ${l.harness}: `,
          l.promoted ? el("code", {}, l.promoted.servedName) : "base model (nothing promoted)",
        ),
        l.decisions.length === 0
          ? el(
              "p",
              { class: "muted" },
              "No promotion yet: an evaluation that passes the gate promotes its candidate.",
            )
          : el(
              "ol",
              { class: "decisions" },
              l.decisions.map((d) =>
                el(
                  "li",
                  { "data-decision": d.action },
                  el(
                    "strong",
                    {},
                    d.action === "promote"
                      ? `promoted ${served(d.adapter)}`
                      : `rolled back to ${served(d.adapter)}`,
                  ),
                  ` (was ${served(d.previous)}; ${d.evalId ? `evaluation ${d.evalId}` : "by hand"}; ${when(d.at)}; `,
                  link(d.uiUrl, "workflow"),
                  "): ",
                  d.reason,
                ),
              ),
            ),
      ),
    ),
  );
}

// ---- the loop

async function refresh() {
  try {
    await Promise.all([
      showRuns(),
      showRun(),
      showEvals(),
      showAdapters().catch((err) => setStatus(err.message, true)),
    ]);
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  } catch (err) {
    if (err instanceof Unauthorized) return signOut(err.message);
    setStatus(err.message, true);
  }
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  clearInterval(state.timer);
  document.getElementById("main").hidden = true;
  document.getElementById("login").hidden = false;
  setStatus(message, true);
}

function start(token) {
  state.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
  document.getElementById("login").hidden = true;
  document.getElementById("main").hidden = false;
  void refresh();
  clearInterval(state.timer);
  state.timer = setInterval(() => void refresh(), REFRESH_MS);
}

function main() {
  const params = new URLSearchParams(location.hash.slice(1));
  const fromAddress = params.get("token");
  if (params.get("run")) state.run = params.get("run");
  // The token leaves the address at once (history, screenshots); the run stays.
  if (fromAddress) history.replaceState(null, "", state.run ? `#run=${encodeURIComponent(state.run)}` : "#");
  document.getElementById("login").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = new FormData(event.target).get("token");
    if (token) start(String(token));
  });
  const token = fromAddress ?? sessionStorage.getItem(TOKEN_KEY);
  if (token) start(token);
  else signOut("enter the API token");
}

main();
