#!/usr/bin/env -S node --import tsx
/**
 * TEST DOUBLE for the model server, as its own process:
 *   node --import tsx packages/testkit/src/scripted-upstream.ts --port N --script file.json
 * Prints `listening on http://HOST:PORT` once it accepts connections; stops on SIGTERM/SIGINT.
 * The script format is documented in `script.ts` (a JSON list of turns).
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { startScriptedUpstream } from "./upstream.ts";

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "0" },
    host: { type: "string", default: "127.0.0.1" },
    script: { type: "string" },
    model: { type: "string", multiple: true },
    "no-record": { type: "boolean" },
  },
});
if (!values.script) {
  process.stderr.write("scripted-upstream: --script <file.json> is required\n");
  process.exit(2);
}
let script: unknown;
try {
  script = JSON.parse(readFileSync(values.script, "utf8"));
} catch (err) {
  process.stderr.write(`scripted-upstream: cannot read ${values.script}: ${(err as Error).message}\n`);
  process.exit(2);
}
const upstream = await startScriptedUpstream({
  script,
  port: Number(values.port),
  host: values.host,
  record: !values["no-record"],
  ...(values.model ? { models: values.model } : {}),
}).catch((err: unknown) => {
  process.stderr.write(`scripted-upstream: ${(err as Error).message}\n`);
  process.exit(1);
});
process.stdout.write(`listening on ${upstream.url}\n`);
const stop = () => void upstream.close().then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
