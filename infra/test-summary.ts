/**
 * Adds up every package's vitest JSON report into one closing line, `N passed, N failed`, so a
 * reader (or CI) sees the whole suite's result at the end of the run.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const root = join(import.meta.dirname, "..");
const seconds = Number(process.argv[2] ?? 0);
/** How the test runner itself exited: a package can fail with every test passed (an unhandled error). */
const runnerStatus = Number(process.argv[3] ?? 0);

function* reports(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (name === "test-results.json") yield path;
    else if (statSync(path).isDirectory()) yield* reports(path);
  }
}

interface Report {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults?: {
    name: string;
    message?: string;
    assertionResults?: { fullName: string; status: string; failureMessages?: string[] }[];
  }[];
}

/** What failed, named, with the head of its message: the end of a long log is what CI shows. */
function failures(report: Report): string[] {
  const lines: string[] = [];
  for (const file of report.testResults ?? []) {
    const failed = (file.assertionResults ?? []).filter((a) => a.status === "failed");
    if (failed.length === 0 && file.message)
      lines.push(`    ${relative(root, file.name)}: ${firstLines(file.message)}`);
    for (const test of failed) {
      lines.push(`    ${relative(root, file.name)} > ${test.fullName}`);
      const message = test.failureMessages?.[0];
      if (message) lines.push(`      ${firstLines(message)}`);
    }
  }
  return lines;
}

function firstLines(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: strips colour codes from messages
  const plain = text.replace(/\u001b\[[0-9;]*m/g, "");
  return plain.split("\n").slice(0, 6).join("\n      ").slice(0, 1200);
}

const failedTests: string[] = [];
let passed = 0;
let failed = 0;
let skipped = 0;
for (const file of reports(root)) {
  const report = JSON.parse(readFileSync(file, "utf8")) as Report;
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + report.numTodoTests;
  console.log(
    `  ${relative(root, file).replace("/test-results.json", "").padEnd(24)} ${report.numPassedTests} passed, ${report.numFailedTests} failed`,
  );
  failedTests.push(...failures(report));
}
if (failedTests.length > 0) console.log(["failed:", ...failedTests].join("\n"));
console.log(`suite finished in ${Math.floor(seconds / 60)}m${seconds % 60}s`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
if (runnerStatus !== 0 && failed === 0)
  console.log(
    `FAILED: the test runner exited ${runnerStatus} with no failed test: a package errored outside its tests (look above for "Unhandled Errors" and turbo's "Failed:" line)`,
  );
process.exit(failed > 0 || passed === 0 || runnerStatus !== 0 ? 1 : 0);
