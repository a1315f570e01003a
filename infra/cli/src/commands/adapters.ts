import { type LineageDecision, type LineageView, servedName } from "@bridle/contracts";
import type { StackConfig } from "@bridle/stack";
import { answer, gatewayClient } from "../gateway.ts";

type Say = (line: string) => void;

export const adaptersUsage = `  adapters           each (model, harness) lineage: its promoted version, the decisions with the
                     evaluations behind them, and every adapter version with its parent
  adapters promote NAME@vN --reason TEXT
                     promote a serving version by hand (a promotion workflow)
  adapters rollback MODEL/HARNESS --reason TEXT
                     roll the promoted version back to what was promoted before it (a rollback workflow)`;

const served = (ref: { name: string; version: number } | null) =>
  ref ? servedName(ref.name, ref.version) : "the base model";

function decisionLine(d: LineageDecision): string {
  const by = d.evalId ? `evaluation ${d.evalId}` : "by hand";
  const what =
    d.action === "promote" ? `promoted ${served(d.adapter)}` : `rolled back to ${served(d.adapter)}`;
  return `    ${d.at.slice(0, 19).replace("T", " ")}  ${what} (was ${served(d.previous)}; ${by}): ${d.reason}`;
}

function printLineage(l: LineageView, say: Say): void {
  say(
    `${l.model} in ${l.harness}: promoted ${l.promoted ? `${l.promoted.servedName} (${l.promoted.hash.slice(0, 12)})` : "nothing (the base model)"}`,
  );
  if (l.decisions.length > 0) {
    say("  decisions:");
    for (const d of l.decisions) say(decisionLine(d));
  }
  for (const a of l.adapters) {
    say(`  ${a.name}`);
    for (const v of a.versions) {
      const parent = v.parent ? `from ${served(v.parent)}` : "fresh";
      say(`    v${v.version}  ${v.state.padEnd(8)} step ${v.step ?? "-"}  ${v.hash.slice(0, 12)}  ${parent}`);
    }
  }
}

/** `bridle adapters [promote|rollback]`: lineages as the gateway reads them from serving. */
export async function adaptersCommand(
  config: StackConfig,
  args: string[],
  flags: { reason?: string | undefined; json?: boolean | undefined },
  say: Say,
): Promise<number> {
  const api = gatewayClient(config);
  const [sub, target] = args;
  if (sub === undefined || sub === "list") {
    const { lineages } = await answer((init) => api.v1.lineages.$get({}, { init }));
    if (flags.json) say(JSON.stringify(lineages, null, 2));
    else if (lineages.length === 0) say("no adapters yet: `bridle train` makes the first");
    else for (const l of lineages) printLineage(l, say);
    return 0;
  }
  if ((sub !== "promote" && sub !== "rollback") || !target || !flags.reason) {
    process.stderr.write(
      `bridle adapters: use 'adapters', or 'adapters promote|rollback <target> --reason TEXT'\n\n${adaptersUsage}\n`,
    );
    return 2;
  }
  if (sub === "promote") {
    const at = /^([^/]+)\/([^/]+)\/[^@]+@v\d+$/.exec(target);
    if (!at) {
      process.stderr.write(
        `bridle adapters promote: '${target}' is not a versioned name <model>/<harness>/<run>@v<N>\n`,
      );
      return 2;
    }
    const done = await answer(
      (init) =>
        api.v1.lineages[":model"][":harness"].promotions.$post(
          { param: { model: at[1]!, harness: at[2]! }, json: { adapter: target, reason: flags.reason! } },
          { init },
        ),
      330_000,
    );
    say(
      `promoted ${served(done.decision.adapter)} (was ${served(done.decision.previous)}); workflow ${done.uiUrl}`,
    );
    return 0;
  }
  const [model, harness, rest] = target.split("/");
  if (!model || !harness || rest !== undefined) {
    process.stderr.write(`bridle adapters rollback: '${target}' is not <model>/<harness>\n`);
    return 2;
  }
  const done = await answer(
    (init) =>
      api.v1.lineages[":model"][":harness"].rollbacks.$post(
        { param: { model, harness }, json: { reason: flags.reason! } },
        { init },
      ),
    330_000,
  );
  say(
    `rolled ${served(done.decision.previous)} back; now promoted: ${served(done.decision.adapter)}; workflow ${done.uiUrl}`,
  );
  return 0;
}
