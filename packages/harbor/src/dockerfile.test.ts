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
const layout = (dockerfile: string, taskWorkdir?: string) => {
  const { files, notes, workdir } = workspaceFromDockerfile(dockerfile, context, "Dockerfile", taskWorkdir);
  return { paths: files.map((f) => f.path), notes, workdir };
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

  it("says what bubblewrap cannot honour: files outside the workdir, RUN steps, other stages", () => {
    const { paths, notes, workdir } = layout(
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
    expect(workdir).toBe("/workspace");
    expect(paths).toEqual(["access.log"]);
    expect(notes).toEqual([
      "Dockerfile: line 5: COPY --from=builder: copies from another image, not read",
      "Dockerfile: line 6: COPY missing.txt: nothing in the build context matches",
      "Dockerfile: files it places outside /workspace (/app, /etc) are not there in bubblewrap",
      "Dockerfile: 1 RUN step not run: packages or files they make are missing",
    ]);
  });

  it("takes the workdir from the task, else the last WORKDIR, else /app; one it cannot show falls back to /app", () => {
    const dockerfile = "FROM node\nWORKDIR /srv/site\nCOPY notes.txt ./\nCOPY project /app/\n";
    expect(layout(dockerfile)).toMatchObject({ workdir: "/srv/site", paths: ["notes.txt"] });
    expect(layout(dockerfile, "/app")).toMatchObject({ workdir: "/app", paths: ["app.py", "lib/util.py"] });
    expect(layout("FROM debian\nCOPY notes.txt /app/\n")).toMatchObject({
      workdir: "/app",
      paths: ["notes.txt"],
    });
    const usr = layout("FROM node\nWORKDIR /usr/src/app\nCOPY notes.txt ./\n");
    expect(usr.workdir).toBe("/app");
    expect(usr.notes[0]).toBe(
      "Dockerfile: WORKDIR /usr/src/app: is under /usr, which the sandbox keeps for the system or its own mounts; the agent and the tests start in /app here",
    );
  });

  it("leaves the whole context as the workspace when the Dockerfile copies nothing", () => {
    expect(layout("FROM debian\nWORKDIR /app\nRUN pip install pytest\n")).toEqual({
      paths: context.map((f) => f.path),
      notes: ["Dockerfile: 1 RUN step not run: packages or files they make are missing"],
      workdir: "/app",
    });
  });
});
