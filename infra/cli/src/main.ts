#!/usr/bin/env -S node --import tsx
import { parseArgs } from "node:util";
import { EnvError, ServiceError } from "@bridle/service-kit";
import { down, endpoints, loadStackConfig, type StackConfig, StackError, status, up } from "@bridle/stack";
import { checkMoves } from "@bridle/testkit";
import { adaptersCommand, adaptersUsage } from "./commands/adapters.ts";
import { composeCommand, composeUsage } from "./commands/compose.ts";
import { ensureBundledTasks, experiment, experimentUsage } from "./commands/experiment.ts";
import { guardCheck } from "./commands/guard-check.ts";
import { harnessCheck } from "./commands/harness-check.ts";
import { poolCommand, poolUsage } from "./commands/pool.ts";
import { runProbe } from "./commands/probe.ts";
import { tasksCommand, tasksUsage } from "./commands/tasks.ts";
import {
  evaluate,
  evaluateMatrix,
  importBundledTasks,
  listRuns,
  signalRun,
  train,
  trainingUsage,
} from "./commands/training.ts";

const usage = `bridle: train and evaluate harness-specific LoRA adapters

Usage: bridle <command> [options]

Stack:
  up                 start the embedded stack in the background and wait until it is healthy
  down               stop the stack
  status [--json]    show each component's state and health
  probe [--prompt P] run the stack probe workflow through the gateway
  dashboard          print the dashboard's address, the API token in its fragment (runs with live
                     curves, evaluation reports, adapters); open it in a browser
  demo               the main job: up, then the short experiment (train, then adapter vs base)
${composeUsage}

Training and evaluation:
${trainingUsage}
${experimentUsage}
${poolUsage}

Adapters:
${adaptersUsage}

Guard:
  guard check <calls.jsonl>  apply the guard's rules to one tool call per line; prints one verdict per line

Harnesses:
  harness check <name|all> [--context-window N] [--port-base N] [--json]
                     the conformance check of a pinned harness version, on a scripted model server:
                     tool calls round-trip, each call extends the last, crashes and timeouts fail;
                     stored per (harness, version): training refuses a version whose check failed

Tasks:
${tasksUsage}

Settings come from BRIDLE_* environment variables (see README.md).`;

const say = (line: string) => process.stdout.write(`${line}\n`);

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: "boolean" },
      prompt: { type: "string" },
      help: { type: "boolean", short: "h" },
      "no-record": { type: "boolean" },
      parallel: { type: "string" },
      repeat: { type: "string" },
      "schema-only": { type: "boolean" },
      "no-controls": { type: "boolean" },
      name: { type: "string" },
      harness: { type: "string" },
      steps: { type: "string" },
      batch: { type: "string" },
      group: { type: "string" },
      follow: { type: "boolean" },
      unproven: { type: "boolean" },
      candidate: { type: "string" },
      baseline: { type: "string" },
      limit: { type: "string" },
      attempts: { type: "string" },
      tasks: { type: "string" },
      temperature: { type: "string" },
      "max-turns": { type: "string" },
      "agent-timeout": { type: "string" },
      split: { type: "string" },
      seed: { type: "string" },
      full: { type: "boolean" },
      out: { type: "string" },
      lr: { type: "string" },
      heldout: { type: "string" },
      "heldout-tier": { type: "string" },
      tier: { type: "string" },
      "context-window": { type: "string" },
      matrix: { type: "boolean" },
      candidates: { type: "string" },
      harnesses: { type: "string" },
      "port-base": { type: "string" },
      start: { type: "string" },
      reason: { type: "string" },
    },
  });
  const command = positionals[0];
  if (values.help || command === "help") {
    say(usage);
    return 0;
  }
  if (!command) {
    process.stderr.write(`${usage}\n`);
    return 2;
  }
  if (command === "guard") {
    if (positionals[1] !== "check") {
      process.stderr.write(`bridle guard: unknown sub-command '${positionals[1] ?? ""}'\n\n${usage}\n`);
      return 2;
    }
    return guardCheck(positionals[2], say);
  }
  // Pooling reads reports only: no stack and no settings.
  if (command === "experiment" && positionals[1] === "pool")
    return poolCommand(positionals.slice(2), values, say);
  const config = loadStackConfig();
  switch (command) {
    case "up":
      await up(config, say);
      printEndpoints(config);
      return 0;
    case "down":
      await down(config, say);
      return 0;
    case "status":
      return printStatus(config, values.json === true);
    case "probe":
      return probe(config, values.prompt);
    case "dashboard":
      // The fragment never reaches a server or a log: the page reads it, keeps it for the tab, and
      // takes it out of the address.
      say(`http://${config.host}:${config.ports.gateway}/ui/#token=${encodeURIComponent(config.apiToken)}`);
      return 0;
    case "demo":
      return demo(config);
    case "train": {
      const run = await train(config, values, say);
      return run.status === "FAILED" || run.status === "TERMINATED" ? 1 : 0;
    }
    case "eval": {
      if (values.matrix) return evaluateMatrix(config, values, say);
      const view = await evaluate(config, values, say);
      return view.status === "COMPLETED" ? 0 : 1;
    }
    case "experiment":
      await up(config, say);
      await ensureBundledTasks(config, say);
      return experiment(config, values, say);
    case "runs":
      return positionals[1] === undefined || positionals[1] === "list"
        ? listRuns(config, say)
        : signalRun(config, positionals[1], positionals[2], say);
    case "compose":
      return composeCommand(config, positionals[1], say);
    case "tasks":
      return tasksCommand(config, positionals.slice(1), values, say);
    case "adapters":
      return adaptersCommand(config, positionals.slice(1), values, say);
    case "harness": {
      const target = positionals[2];
      if (positionals[1] !== "check" || !target) {
        process.stderr.write(`bridle harness: use 'harness check <name|all>'\n\n${usage}\n`);
        return 2;
      }
      const count = (flag: string, value: string | undefined) => {
        if (value === undefined) return undefined;
        const n = Number(value);
        if (!Number.isInteger(n) || n <= 0)
          throw new Error(`bridle harness check: --${flag} takes a positive integer, not '${value}'`);
        return n;
      };
      const results = await harnessCheck(
        config,
        target === "all" ? Object.keys(checkMoves) : target.split(","),
        {
          ...(values["context-window"]
            ? { contextWindow: count("context-window", values["context-window"]) }
            : {}),
          ...(values["port-base"] ? { portBase: count("port-base", values["port-base"]) } : {}),
        },
        values.json ? () => {} : say,
      );
      if (values.json) say(JSON.stringify(results, null, 2));
      return results.every((r) => r.passed) ? 0 : 1;
    }
    default:
      process.stderr.write(`bridle: unknown command '${command}'\n\n${usage}\n`);
      return 2;
  }
}

/**
 * The main job on the embedded default: bring the stack up, import the bundled tasks, and run the
 * short experiment: a few real training steps, then the adapter against the base model on the
 * held-out tasks with the same seeds, with an honest verdict.
 */
async function demo(config: StackConfig): Promise<number> {
  await up(config, say);
  printEndpoints(config);
  await importBundledTasks(config, say);
  return experiment(config, {}, say);
}

function printEndpoints(config: StackConfig): void {
  say("the stack is up:");
  for (const [name, url] of Object.entries(endpoints(config))) say(`  ${name.padEnd(13)} ${url}`);
}

async function printStatus(config: StackConfig, json: boolean): Promise<number> {
  const view = await status(config);
  if (json) say(JSON.stringify(view, null, 2));
  else {
    say(view.running ? "the stack is running" : "the stack is not running");
    for (const c of view.components) {
      const detail = c.error ? `  ${c.error.split("\n")[0]}` : "";
      say(
        `  ${c.name.padEnd(9)} ${c.status.padEnd(10)} ${c.healthy ? "healthy  " : "unhealthy"} restarts=${c.restarts}${c.pid ? ` pid=${c.pid}` : ""}${detail}`,
      );
    }
  }
  return view.running && view.components.every((c) => c.healthy) ? 0 : 1;
}

async function probe(config: StackConfig, prompt: string | undefined): Promise<number> {
  say("running the stack probe workflow (gateway -> Temporal -> worker -> serving -> model server)");
  const view = await runProbe(config, prompt);
  say(`workflow ${view.id}: ${view.status}`);
  if (view.result) {
    const { model, completion, elapsedMs } = view.result;
    say(`  model        ${model.id} (${model.root})`);
    say(`  completion   ${JSON.stringify(completion.text)}`);
    say(
      `  tokens       prompt ${completion.promptTokenIds.length}, completion ${completion.completionTokenIds.length}`,
    );
    say(`  logprobs     ${completion.logprobs.map((l) => l.toFixed(3)).join(" ")}`);
    say(`  elapsed      ${elapsedMs} ms`);
  }
  if (view.failure) say(`  failure      ${view.failure}`);
  say(`Temporal UI:   ${view.uiUrl}`);
  return view.status === "COMPLETED" ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof StackError || err instanceof EnvError || err instanceof ServiceError) {
      process.stderr.write(`bridle: ${err.message}\n`);
      process.exit(1);
    }
    if (err instanceof TypeError && (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(`bridle: ${err.message}\n\n${usage}\n`);
      process.exit(2);
    }
    process.stderr.write(
      `bridle: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
