import { describe, expect, it } from "vitest";
import { workspaceFromDockerfile } from "./dockerfile.ts";
import type { TreeFile } from "./files.ts";

const file = (path: string): TreeFile => ({ path, mode: 0o644, content: Buffer.from(path) });
const context = [
  "data/access.log",
  "project/app.py",
  "project/lib/util.py",
  "notes.txt",
  "etc/hosts.txt",
].map(file);
const layout = (dockerfile: string) => {
  const { files, notes } = workspaceFromDockerfile(dockerfile, context, "Dockerfile");
  return { paths: files.map((f) => f.path), notes };
};

describe("the workspace a Dockerfile leaves in /app", () => {
  it("places a file where COPY names it, and a folder's contents into the destination", () => {
    expect(layout("FROM debian\nWORKDIR /app\nCOPY data/access.log /app/access.log\n").paths).toEqual([
      "access.log",
    ]);
    expect(layout("FROM debian\nCOPY project/ /app/\n").paths).toEqual(["app.py", "lib/util.py"]);
    expect(layout("FROM debian\nWORKDIR /app\nCOPY project ./src\nCOPY notes.txt .\n").paths).toEqual([
      "notes.txt",
      "src/app.py",
      "src/lib/util.py",
    ]);
  });

  it("reads continuations, the JSON form, flags, patterns and relative WORKDIRs", () => {
    const { paths } = layout(
      [
        "FROM python:3.13 AS base",
        "# a comment",
        "WORKDIR /",
        "WORKDIR app",
        'COPY ["notes.txt", "data/access.log", "./in/"]',
        "COPY --chown=1000:1000 \\",
        "     project/*.py \\",
        "     py/",
        "ADD etc/*.txt /app/etc/",
      ].join("\n"),
    );
    expect(paths).toEqual(["etc/hosts.txt", "in/access.log", "in/notes.txt", "py/app.py"]);
  });

  it("says what bubblewrap cannot honour: files outside /app, RUN steps, other stages, another WORKDIR", () => {
    const { paths, notes } = layout(
      [
        "FROM debian",
        "RUN apt-get update && apt-get install -y jq",
        "WORKDIR /workspace",
        "COPY etc/hosts.txt /etc/hosts.txt",
        "COPY --from=builder /out/bin /usr/local/bin/",
        "COPY missing.txt .",
        "COPY data/access.log .",
        "COPY notes.txt /app/",
      ].join("\n"),
    );
    expect(paths).toEqual(["notes.txt"]);
    expect(notes).toEqual([
      "Dockerfile: line 5: COPY --from=builder: copies from another image, not read",
      "Dockerfile: line 6: COPY missing.txt: nothing in the build context matches",
      "Dockerfile: files it places outside /app (/etc, /workspace) are not there in bubblewrap",
      "Dockerfile: WORKDIR /workspace: the agent and the tests start in /app here",
      "Dockerfile: 1 RUN step not run: packages or files they make are missing",
    ]);
  });

  it("leaves the whole context as the workspace when the Dockerfile copies nothing", () => {
    expect(layout("FROM debian\nWORKDIR /app\nRUN pip install pytest\n")).toEqual({
      paths: context.map((f) => f.path),
      notes: ["Dockerfile: 1 RUN step not run: packages or files they make are missing"],
    });
  });
});
