import { describe, expect, it } from "vitest";
import { shellEffects } from "./effects.ts";
import { parseShell } from "./shell.ts";

const argvs = (line: string) => parseShell(line).map((c) => c.argv.join(" "));
const writes = (line: string) => shellEffects(line).flatMap((e) => (e.kind === "write" ? [e.path] : []));

describe("shell parsing", () => {
  it("splits on pipes, &&, ; and newlines and keeps quoted words whole", () => {
    expect(argvs("a 'b c' | d && e; f\ng \"h;i\"")).toEqual(["a b c", "d", "e", "f", "g h;i"]);
  });

  it("recurses into bash -c, sh -lc and eval", () => {
    expect(argvs("bash -c 'rm x && ls'")).toEqual(["bash -c rm x && ls", "rm x", "ls"]);
    expect(argvs('sh -lc "touch y"')).toContain("touch y");
    expect(argvs("eval 'rm z'")).toContain("rm z");
  });

  it("strips env prefixes and wrappers and expands variables set earlier", () => {
    expect(argvs("X=1 sudo -u bob env Y=2 timeout 5 rm f")).toContain("rm f");
    expect(argvs("D=tests; rm -r $D/x")).toEqual(["rm -r tests/x"]);
  });

  it("decodes base64 piped into a shell and parses heredocs", () => {
    const payload = Buffer.from("rm -rf tests").toString("base64");
    expect(argvs(`echo ${payload} | base64 -d | sh`)).toContain("rm -rf tests");
    expect(writes("cat > tests/t.py <<EOF\nx = 1\nEOF")).toEqual(["tests/t.py"]);
  });

  it("resolves relative paths and .. against cd", () => {
    expect(writes("cd src/pkg && rm ../../tests/a.py")).toEqual(["tests/a.py"]);
    expect(writes("echo hi > ./out/../log.txt 2>&1")).toEqual(["log.txt"]);
  });

  it("treats descriptor duplication and /dev/null as no file writes", () => {
    expect(writes("pytest 2>&1 > /dev/null")).toEqual([]);
  });
});
