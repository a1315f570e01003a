/**
 * Rollouts per minute with 1, 2 and 4 rollout nodes beside one model server, each node its own
 * guard, runner and rollout-only worker (`src/nodes.ts`). One training step of 16 rollouts per
 * layout, on the qa-random-credit fixture (its verifier is a TEST DOUBLE for partial credit, so
 * each rollout is one short model call and a verification); timed from the run's start to the end
 * of its rollouts. One node runs first and again last, so drift on a noisy machine shows. Too long
 * for the suite (about 10 minutes on 2 cores): `pnpm bench:nodes` in test/.
 */
import { rmSync } from "node:fs";
import { callJson } from "@bridle/service-kit";
import { down, up } from "@bridle/stack";
import { Connection } from "@temporalio/client";
import { z } from "zod";
import { startRolloutNode } from "../src/nodes.ts";
import { ownStack, RunView, say, sleep } from "./stack.ts";

const ROLLOUTS = 16;
const LAYOUTS = [1, 2, 4, 1];
const { config, gateway, headers } = ownStack("bench-nodes", 31);

/** Seconds from a run's start to the end of its rollouts, and how many it ran. */
async function timeRollouts(name: string): Promise<{ seconds: number; rollouts: number }> {
  const started = performance.now();
  await callJson(`${gateway}/v1/runs`, {
    schema: z.unknown(),
    headers,
    body: {
      name,
      steps: 1,
      batchSize: 1,
      groupSize: ROLLOUTS,
      redrawFlat: 0,
      tasks: ["qa-random-credit"],
      agentTimeoutSec: 150,
      maxTurns: 1,
      contextWindow: 8192,
      concurrency: ROLLOUTS,
    },
  });
  for (;;) {
    const view = await callJson(`${gateway}/v1/runs/${name}`, { schema: RunView, headers }).catch(
      () => undefined,
    );
    const p = view?.progress;
    if (view && view.status !== "RUNNING")
      throw new Error(`run ${name} ended ${view.status}: ${view.failure}`);
    if (p && p.rolloutsDone >= ROLLOUTS && p.phase !== "rollouts" && p.phase !== "sampling") {
      const seconds = (performance.now() - started) / 1000;
      // The run finishes its step (training, the adapter load) before the next layout starts.
      for (;;) {
        const end = await callJson(`${gateway}/v1/runs/${name}`, { schema: RunView, headers });
        if (end.status !== "RUNNING") break;
        await sleep(1_000);
      }
      return { seconds, rollouts: p.rolloutsDone };
    }
    await sleep(250);
  }
}

async function main(): Promise<number> {
  await down(config);
  rmSync(config.data, { recursive: true, force: true });
  await up(config, (line) => say(`[stack] ${line}`));
  const connection = await Connection.connect({ address: `${config.host}:${config.ports.temporal}` });
  try {
    const imported = await callJson(`http://${config.host}:${config.ports.tasks}/v1/tasks/import`, {
      schema: z.object({ verdicts: z.array(z.object({ ok: z.boolean() })) }),
      body: { path: new URL("../fixtures/tasks/qa-random-credit", import.meta.url).pathname },
      timeoutMs: 300_000,
    });
    if (!imported.verdicts.every((v) => v.ok)) throw new Error("the fixture task did not import");
    // A warm-up run: the first step loads the trainer's model and the first adapter.
    await timeRollouts("bench-warm-up");
    const rows: { nodes: number; seconds: number; rollouts: number; perMinute: number }[] = [];
    for (const [i, nodes] of LAYOUTS.entries()) {
      const extra = [];
      for (let n = 1; n < nodes; n++) extra.push(await startRolloutNode(config, connection));
      try {
        const { seconds, rollouts } = await timeRollouts(`bench-nodes-${nodes}-${i}`);
        rows.push({ nodes, seconds, rollouts, perMinute: (rollouts / seconds) * 60 });
        say(`${nodes} node(s): ${rollouts} rollouts in ${seconds.toFixed(1)} s`);
      } finally {
        for (const node of extra) await node.stop();
      }
    }
    const baseline = rows[0]!.perMinute;
    say("");
    say("| rollout nodes | rollouts | seconds | rollouts/min | ratio to 1 node (first run) |");
    say("| --- | --- | --- | --- | --- |");
    for (const r of rows)
      say(
        `| ${r.nodes} | ${r.rollouts} | ${r.seconds.toFixed(1)} | ${r.perMinute.toFixed(1)} | ${(r.perMinute / baseline).toFixed(2)}x |`,
      );
    say(`(${config.model.title}; ${ROLLOUTS} rollouts per layout, each node's worker takes 4 at once)`);
    return 0;
  } finally {
    await connection.close();
    await down(config);
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench:nodes: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
