import { createReadStream } from "node:fs";
import { access } from "node:fs/promises";
import { createInterface } from "node:readline";
import { auditLine } from "@bridle/guard-rules";

/**
 * `bridle guard check <calls.jsonl>`: applies the guard's rules (the very code the proxy runs) to
 * one tool call per line and prints one JSON verdict per line. A bad line gives an `error` verdict
 * and the audit goes on. Returns the exit code: 0, or 1 when the file cannot be read.
 */
export async function guardCheck(file: string | undefined, say: (line: string) => void): Promise<number> {
  if (!file) {
    process.stderr.write("bridle guard check: give the calls file (JSON lines), or - for stdin\n");
    return 2;
  }
  if (file !== "-") {
    try {
      await access(file);
    } catch {
      process.stderr.write(`bridle guard check: cannot read ${file}\n`);
      return 1;
    }
  }
  const input = file === "-" ? process.stdin : createReadStream(file, { encoding: "utf8" });
  const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  for await (const line of lines) {
    if (line.trim().length === 0) continue;
    say(JSON.stringify(auditLine(line)));
  }
  return 0;
}
