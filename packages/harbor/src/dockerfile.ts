import { posix } from "node:path";
import { dockerfileInstructions, WORKSPACE, workdirProblem } from "@bridle/sandbox";
import type { TreeFile } from "./files.ts";

/** A task's Dockerfile and what running without its image means. */
export interface TaskDockerfile {
  /** How the Dockerfile is named in notes (`environment/Dockerfile`, `Dockerfile`). */
  name: string;
  content: string;
  /** The build context: the folder's files (a Terminal-Bench 1 task's, less its tests and solution). */
  context: TreeFile[];
  /** Notes that hold when the image is not built: bubblewrap on this host's tools instead. */
  withoutImage: string[];
}

/**
 * The workspace a task's Dockerfile would leave, read from its `WORKDIR`, `COPY` and `ADD` lines,
 * without building an image: the sandbox's workdir (`workdir` when the task names one, else the
 * Dockerfile's last WORKDIR, else /app), and the files of the build context that those lines place
 * under it, at the paths they give. What the bubblewrap sandbox cannot honour (files placed
 * elsewhere, `RUN` steps, a stage's `COPY --from`, a WORKDIR it cannot show) is said in `notes`.
 * A Dockerfile with no COPY or ADD leaves the whole context as the workspace, as before.
 */
export function workspaceFromDockerfile(
  dockerfile: string,
  context: TreeFile[],
  /** How the Dockerfile is named in notes (`environment/Dockerfile`, `Dockerfile`). */
  name: string,
  /** The task's own workdir (task.toml's `[environment] workdir`), which wins over WORKDIR. */
  taskWorkdir?: string,
): { files: TreeFile[]; notes: string[]; workdir: string } {
  const notes: string[] = [];
  let current = "/";
  let runs = 0;
  let copies = 0;
  // Every file the COPY and ADD lines place, by its absolute path in the image.
  const placed = new Map<string, TreeFile>();
  for (const { line, text } of dockerfileInstructions(dockerfile)) {
    const [keyword = "", ...rest] = text.split(/\s+/);
    const args = rest.join(" ");
    switch (keyword.toUpperCase()) {
      case "WORKDIR":
        current = posix.resolve(current, unquote(args));
        break;
      case "RUN":
        runs++;
        break;
      case "COPY":
      case "ADD": {
        copies++;
        const { flags, paths } = copyArgs(args);
        if (flags.some((f) => f.startsWith("--from"))) {
          notes.push(
            `${name}: line ${line}: ${keyword} ${flags.join(" ")}: copies from another image, not read`,
          );
          break;
        }
        const dest = paths.pop();
        if (dest === undefined || paths.length === 0) break;
        const target = posix.resolve(current, dest);
        for (const source of paths) {
          const intoFolder = dest.endsWith("/") || dest === "." || paths.length > 1 || /[*?[]/.test(source);
          const matches = matching(context, source);
          if (matches.length === 0)
            notes.push(`${name}: line ${line}: ${keyword} ${source}: nothing in the build context matches`);
          for (const { file, relative } of matches) {
            const at =
              relative === ""
                ? intoFolder
                  ? posix.join(target, posix.basename(file.path))
                  : target
                : posix.join(target, relative);
            placed.set(at, file);
          }
        }
        break;
      }
    }
  }
  let workdir = taskWorkdir ?? (current === "/" ? WORKSPACE : current);
  const problem = taskWorkdir === undefined ? workdirProblem(workdir) : null;
  if (problem) {
    notes.push(
      `${name}: WORKDIR ${workdir}: ${problem.replace(/^workdir \S+ /, "")}; the agent and the tests start in ${WORKSPACE} here`,
    );
    workdir = WORKSPACE;
  }
  if (copies === 0) return { files: context, notes: [...notes, ...runNote(name, runs)], workdir };
  const files: TreeFile[] = [];
  const outside = new Set<string>();
  for (const [at, file] of placed) {
    if (at.startsWith(`${workdir}/`)) files.push({ ...file, path: posix.relative(workdir, at) });
    else outside.add(posix.dirname(at));
  }
  if (outside.size > 0)
    notes.push(
      `${name}: files it places outside ${workdir} (${[...outside].sort().slice(0, 4).join(", ")}${outside.size > 4 ? ", ..." : ""}) are not there in bubblewrap`,
    );
  notes.push(...runNote(name, runs));
  return { files: files.sort((a, b) => (a.path < b.path ? -1 : 1)), notes, workdir };
}

function runNote(name: string, runs: number): string[] {
  return runs > 0
    ? [`${name}: ${runs} RUN step${runs === 1 ? "" : "s"} not run: packages or files they make are missing`]
    : [];
}

/** COPY/ADD arguments: leading `--flag`s, then paths (JSON array form or whitespace-separated). */
function copyArgs(args: string): { flags: string[]; paths: string[] } {
  const words = args.trim();
  const flags: string[] = [];
  let rest = words;
  for (;;) {
    const m = /^(--\S+)\s+/.exec(rest);
    if (!m) break;
    flags.push(m[1]!);
    rest = rest.slice(m[0].length);
  }
  if (rest.startsWith("[")) {
    try {
      const parsed: unknown = JSON.parse(rest);
      if (Array.isArray(parsed) && parsed.every((p) => typeof p === "string"))
        return { flags, paths: parsed };
    } catch {
      // Not JSON after all: read it as words.
    }
  }
  return { flags, paths: rest.split(/\s+/).filter(Boolean).map(unquote) };
}

const unquote = (text: string) => text.trim().replace(/^(["'])(.*)\1$/, "$2");

/**
 * The context files a COPY source names, each with its path below the source (empty when the
 * source names the file itself): a file, a folder (its contents), `.`, or a `*`/`?` pattern.
 */
function matching(context: TreeFile[], source: string): { file: TreeFile; relative: string }[] {
  const clean = posix.normalize(source.replace(/^\/+/, "")).replace(/\/+$/, "");
  if (clean === "." || clean === "") return context.map((file) => ({ file, relative: file.path }));
  if (/[*?[]/.test(clean)) {
    const pattern = new RegExp(
      `^${clean
        .replace(/[.+^${}()|\\]/g, "\\$&")
        .replace(/\*/g, "[^/]*")
        .replace(/\?/g, "[^/]")}(/.*)?$`,
    );
    return context.flatMap((file) => {
      const m = pattern.exec(file.path);
      if (!m) return [];
      // A pattern that names a folder copies its contents, as Docker does.
      return [{ file, relative: m[1] ? m[1].slice(1) : "" }];
    });
  }
  return context.flatMap((file) =>
    file.path === clean
      ? [{ file, relative: "" }]
      : file.path.startsWith(`${clean}/`)
        ? [{ file, relative: file.path.slice(clean.length + 1) }]
        : [],
  );
}
