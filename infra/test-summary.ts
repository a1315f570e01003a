/**
 * Adds up every package's vitest JSON report into one closing line, `N passed, N failed`, so a
 * reader (or CI) sees the whole suite's result at the end of the run.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const root = join(import.meta.dirname, "..");
const seconds = Number(process.argv[2] ?? 0);

function* reports(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (name === "test-results.json") yield path;
    else if (statSync(path).isDirectory()) yield* reports(path);
  }
}

let passed = 0;
let failed = 0;
let skipped = 0;
for (const file of reports(root)) {
  const report = JSON.parse(readFileSync(file, "utf8")) as {
    numPassedTests: number;
    numFailedTests: number;
    numPendingTests: number;
    numTodoTests: number;
  };
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + report.numTodoTests;
  console.log(
    `  ${relative(root, file).replace("/test-results.json", "").padEnd(24)} ${report.numPassedTests} passed, ${report.numFailedTests} failed`,
  );
}
console.log(`suite finished in ${Math.floor(seconds / 60)}m${seconds % 60}s`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
