/**
 * The guard's SSE reading (the maintained `eventsource-parser`) against the hand-written splitter it
 * replaced, on the answer the scripted upstream (TEST DOUBLE for the model server) streams for the
 * benchmark, read once over real HTTP.
 * Both split the same chunks into the same `data:` payloads (checked before timing); the figures
 * are CPU microseconds per answer, the two side by side in one run, with and without the
 * `JSON.parse` of every payload that the exchange adds. Chunkings: the whole answer in one read
 * (a fast upstream), 64-byte reads (events cut mid-way), one event per read (a paced model).
 *
 *   pnpm bench:sse [-- --answers 20000 --rounds 5]
 */
import { parseArgs } from "node:util";
import { spawnScriptedUpstream } from "@bridle/testkit";
import { createParser } from "eventsource-parser";
import { canned, PORTS, requestBody, scriptArgs } from "./setup.ts";

const { values } = parseArgs({
  args: scriptArgs(),
  options: { answers: { type: "string", default: "20000" }, rounds: { type: "string", default: "5" } },
});
const answers = Number(values.answers);
const rounds = Number(values.rounds);
const say = (line: string) => process.stdout.write(`${line}\n`);

type Reader = (chunks: string[], onData: (data: string) => void) => void;

/**
 * The baseline: the guard's splitter before it took `eventsource-parser` (events cut out of the
 * buffer by index at blank lines, one payload per `data:` line; no CR line endings).
 */
function sseDataSplitter(onData: (data: string) => boolean): (chunk: string) => void {
  let buffer = "";
  let stopped = false;
  const line = (text: string): boolean =>
    text.startsWith("data:") && onData(text.slice(text[5] === " " ? 6 : 5).trim());
  return (chunk) => {
    if (stopped) return;
    buffer = buffer.length > 0 ? buffer + chunk : chunk;
    let from = 0;
    let cut = buffer.indexOf("\n\n");
    while (cut >= 0 && !stopped) {
      const event = buffer.slice(from, cut);
      from = cut + 2;
      if (event.includes("\n")) {
        for (const text of event.split("\n")) {
          stopped = line(text);
          if (stopped) break;
        }
      } else stopped = line(event);
      cut = buffer.indexOf("\n\n", from);
    }
    buffer = from > 0 ? buffer.slice(from) : buffer;
  };
}

const readers: Record<string, Reader> = {
  splitter: (chunks, onData) => {
    const feed = sseDataSplitter((data) => {
      onData(data);
      return data === "[DONE]";
    });
    for (const chunk of chunks) feed(chunk);
  },
  "eventsource-parser": (chunks, onData) => {
    const parser = createParser({ onEvent: (event) => onData(event.data) });
    for (const chunk of chunks) parser.feed(chunk);
  },
};

/** The payloads a reader finds, in order. */
function payloads(reader: Reader, chunks: string[]): string[] {
  const out: string[] = [];
  reader(chunks, (data) => out.push(data));
  return out;
}

/** Median over `rounds` of the CPU microseconds one answer takes. */
function time(reader: Reader, chunks: string[], parse: boolean): number {
  let sink = 0;
  const onData = parse
    ? (data: string) => {
        if (data !== "[DONE]") sink += (JSON.parse(data) as { choices: unknown[] }).choices.length;
      }
    : (data: string) => {
        sink += data.length;
      };
  const samples: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const before = process.cpuUsage();
    for (let i = 0; i < answers; i++) reader(chunks, onData);
    const used = process.cpuUsage(before);
    samples.push((used.user + used.system) / answers);
  }
  if (sink < 0) say("");
  return samples.sort((a, b) => a - b)[Math.floor(samples.length / 2)]!;
}

async function main(): Promise<void> {
  const upstream = await spawnScriptedUpstream([canned], { port: PORTS.upstream, record: false });
  let text: string;
  try {
    const res = await fetch(`${upstream.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: requestBody("bench"),
    });
    text = await res.text();
  } finally {
    await upstream.stop();
  }
  const events = text.split("\n\n").filter((e) => e.length > 0);
  const chunkings: Record<string, string[]> = {
    "one read": [text],
    "64-byte reads": Array.from({ length: Math.ceil(text.length / 64) }, (_, i) =>
      text.slice(i * 64, i * 64 + 64),
    ),
    "an event a read": events.map((e) => `${e}\n\n`),
  };
  say(
    `SSE reading: the canned answer, ${events.length} events, ${text.length} bytes; ${answers} answers per round, median of ${rounds}`,
  );
  say(
    "CPU µs per answer       | split only: splitter  parser  ratio | split + JSON.parse: splitter  parser  ratio",
  );
  for (const [name, chunks] of Object.entries(chunkings)) {
    const expected = payloads(readers.splitter!, chunks);
    const other = payloads(readers["eventsource-parser"]!, chunks);
    if (JSON.stringify(expected) !== JSON.stringify(other))
      throw new Error(`the two readers disagree on the payloads of "${name}"`);
    const [g, p, gj, pj] = [
      time(readers.splitter!, chunks, false),
      time(readers["eventsource-parser"]!, chunks, false),
      time(readers.splitter!, chunks, true),
      time(readers["eventsource-parser"]!, chunks, true),
    ] as [number, number, number, number];
    say(
      `${name.padEnd(23)} | ${g.toFixed(1).padStart(20)} ${p.toFixed(1).padStart(7)} ${(p / g).toFixed(2).padStart(5)}x | ${gj.toFixed(1).padStart(28)} ${pj.toFixed(1).padStart(7)} ${(pj / gj).toFixed(2).padStart(5)}x`,
    );
  }
  say(
    "ratio: eventsource-parser's time (the guard's now) over the former splitter's (above 1.00x, the parser costs more)",
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
