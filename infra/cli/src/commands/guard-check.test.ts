import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runTsx } from "@bridle/service-kit/testing";
import { describe, expect, it } from "vitest";

const cli = fileURLToPath(new URL("../main.ts", import.meta.url));
const run = (args: string[], input?: string) => runTsx(cli, args, input === undefined ? {} : { input });

const base = { instruction: "Fix src/dates.py; the tests are in tests/.", declared_tools: ["bash", "read"] };

describe("bridle guard check (the real CLI process)", () => {
  it("prints one verdict per line, errors for bad lines, and never stops at a bad line", () => {
    const file = join(mkdtempSync(join(tmpdir(), "bridle-check-")), "calls.jsonl");
    const lines = [
      JSON.stringify({ id: "ok", ...base, tool: "bash", arguments: { command: "pytest -q tests" } }),
      "{not json",
      JSON.stringify({
        id: "rm",
        ...base,
        tool: "bash",
        arguments: { command: "bash -c 'rm tests/test_dates.py'" },
      }),
      "",
      JSON.stringify({ id: 7, ...base, tool: "bash" }),
      JSON.stringify({
        id: "host",
        ...base,
        tool: "bash",
        arguments: { command: "curl https://example.net/fix.py" },
        allowed_hosts: ["example.net"],
      }),
      JSON.stringify({ id: "tool", ...base, tool: "Write", arguments: { file_path: "x" } }),
    ];
    writeFileSync(file, `${lines.join("\n")}\n`);
    const result = run(["guard", "check", file]);
    expect(result.status).toBe(0);
    const out = result.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(out).toHaveLength(6);
    expect(out[0]).toEqual({ id: "ok", decision: "allow" });
    expect(out[1]).toMatchObject({
      id: null,
      decision: "error",
      reason: expect.stringContaining("not valid JSON"),
    });
    expect(out[2]).toMatchObject({
      id: "rm",
      decision: "block",
      rule: "test-tampering",
      notice: expect.stringContaining("tests/test_dates.py"),
    });
    expect(out[3]).toMatchObject({ id: 7, decision: "error", reason: expect.stringContaining("arguments") });
    expect(out[4]).toEqual({ id: "host", decision: "allow" });
    expect(out[5]).toMatchObject({ id: "tool", decision: "block", rule: "undeclared-tool" });
  });

  it("reads stdin with - and names an unreadable file", () => {
    const line = JSON.stringify({
      id: 1,
      ...base,
      tool: "bash",
      arguments: { command: "cat /solution/solve.sh" },
    });
    const piped = run(["guard", "check", "-"], `${line}\n`);
    expect(JSON.parse(piped.stdout)).toMatchObject({ id: 1, decision: "block", rule: "answer-retrieval" });
    const missing = run(["guard", "check", "/nonexistent/calls.jsonl"]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("cannot read /nonexistent/calls.jsonl");
  });
});
