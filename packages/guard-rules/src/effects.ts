import type { Effect } from "./effect.ts";
import { hostOfWord } from "./hosts.ts";
import { inlineEffects } from "./inline-code.ts";
import { normalizePath } from "./paths.ts";
import { basename, inlineScript, parseShell, type SimpleCommand } from "./shell.ts";

/** Programs whose path arguments are all changed (deleted, created, moved, permissions). */
const WRITERS = new Set([
  "rm",
  "rmdir",
  "unlink",
  "shred",
  "truncate",
  "touch",
  "chmod",
  "chown",
  "mkdir",
  "tee",
]);
/** Programs that reach the network; a bare `host.tld` argument counts as a target for them. */
const NETWORK = new Set(
  "curl wget http https httpie xh nc ncat netcat telnet ssh scp sftp rsync ftp ping dig nslookup host aria2c lynx links w3m".split(
    " ",
  ),
);
/** Programs whose URL-looking arguments are data (patterns, messages), not targets. */
const TEXT_ONLY = new Set([
  "echo",
  "printf",
  "grep",
  "egrep",
  "fgrep",
  "rg",
  "sed",
  "awk",
  "jq",
  "sort",
  "cut",
  "tr",
  "test",
  "[",
]);
const INTERPRETERS: Record<string, string> = {
  python: "-c",
  node: "-e",
  perl: "-e",
  ruby: "-e",
  php: "-r",
  deno: "eval",
};
/** git sub-commands that look into history or other refs: the commonest way to fetch the known answer. */
const HISTORY_REF =
  /^(--all|--branches|--remotes|--reflog|--tags|--glob.*|origin\/.*|upstream\/.*|FETCH_HEAD|ORIG_HEAD|refs\/.*|.*\.\.\.?.*|@\{.*)$/;

/** A revision before the working state: `HEAD~2`, `HEAD^`, `@~1`, a commit id (7 to 40 hex digits). */
const EARLIER_REV = /^(HEAD|@)([~^]\d*)+$|^[0-9a-f]{7,40}([~^]\d*)*$/;
/** `git log` options that print what commits changed, or search it: the answer of a repair task. */
const LOG_CONTENT =
  /^(-p|-u|--patch|-S.*|-G.*|-L.*|--pickaxe.*|--full-diff|--stat|--name-only|--name-status)$/;

/** Effects of a shell command line, with `cd` tracked so relative paths resolve. */
export function shellEffects(command: string, depth = 0): Effect[] {
  const effects: Effect[] = [];
  let cwd = "";
  for (const cmd of parseShell(command)) {
    const name = cmd.argv[0] ? basename(cmd.argv[0]) : "";
    if (name === "cd" || name === "pushd") {
      cwd = normalizePath(cmd.argv[1] ?? "/root", cwd);
      continue;
    }
    effects.push(...commandEffects(cmd, cwd, depth));
  }
  return effects;
}

function commandEffects(cmd: SimpleCommand, cwd: string, depth: number): Effect[] {
  const out: Effect[] = [];
  const p = (w: string) => normalizePath(w, cwd);
  const [head = "", ...args] = cmd.argv;
  const name = basename(head);
  const positional = args.filter((a) => !a.startsWith("-"));
  if (cmd.argv.length > 0) out.push({ kind: "exec", argv: [name, ...args] });

  for (const r of cmd.redirects) {
    if (r.target === "/dev/null" || r.target.startsWith("/dev/std")) continue;
    if (r.op === "<") out.push({ kind: "read", path: p(r.target), how: "input redirection" });
    else out.push({ kind: "write", path: p(r.target), how: `output redirection (${r.op})`, ...content(cmd) });
  }
  const message = name === "git" && args.some((a) => a === "commit" || a === "tag");
  // `PIP_INDEX_URL=https://host/simple pip install x` points the program at that host.
  for (const value of Object.values(cmd.assigns ?? {})) {
    const host = hostOfWord(value, false);
    if (host) out.push({ kind: "network", host, how: `${name || "environment"} setting` });
  }
  if (!TEXT_ONLY.has(name) && !message) {
    for (const word of args) {
      const host = hostOfWord(word, NETWORK.has(name));
      if (host) out.push({ kind: "network", host, how: name });
    }
  }

  if (WRITERS.has(name)) for (const a of positional) out.push({ kind: "write", path: p(a), how: name });
  else if (name === "mv") for (const a of positional) out.push({ kind: "write", path: p(a), how: "mv" });
  else if (name === "cp" || name === "install" || name === "ln" || name === "rsync") {
    for (const a of positional.slice(0, -1)) out.push({ kind: "read", path: p(a), how: name });
    const dest = positional.at(-1);
    if (dest) out.push({ kind: "write", path: p(dest), how: name });
  } else if (name === "dd") {
    for (const a of args) {
      if (a.startsWith("of=")) out.push({ kind: "write", path: p(a.slice(3)), how: "dd" });
      if (a.startsWith("if=")) out.push({ kind: "read", path: p(a.slice(3)), how: "dd" });
    }
  } else if (name === "sed" || name === "perl" || name === "awk" || name === "gawk") {
    out.push(...inPlaceEdit(name, args, p));
  } else if (name === "find") {
    const writes = args.some((a) => a === "-delete" || a === "-exec" || a === "-execdir");
    const roots = args
      .slice(
        0,
        Math.max(
          0,
          args.findIndex((a) => a.startsWith("-")),
        ),
      )
      .concat();
    const allRoots = roots.length > 0 ? roots : positional.slice(0, 1);
    const names = args.flatMap((a, i) => (a === "-name" || a === "-path" ? [args[i + 1] ?? ""] : []));
    for (const r of allRoots.length > 0 ? allRoots : ["."]) {
      for (const n of names.length > 0 ? names : [""]) {
        const path = p(n && !n.includes("/") ? `${r}/${n}` : n || r);
        out.push(
          writes ? { kind: "write", path, how: "find -delete/-exec" } : { kind: "read", path, how: "find" },
        );
      }
    }
    const exec = args.indexOf("-exec");
    if (exec >= 0)
      out.push(
        ...shellEffects(
          args
            .slice(exec + 1)
            .join(" ")
            .replace(/\\?;$|\+$/, ""),
          depth + 1,
        ),
      );
  } else if (name === "git") {
    out.push(...gitEffects(args, p));
  } else if (name === "patch") {
    for (const a of positional) out.push({ kind: "write", path: p(a), how: "patch" });
  } else if (name === "npm" || name === "pnpm" || name === "yarn") {
    if (args.includes("pkg") && args.some((a) => /^scripts\.test/.test(a)))
      out.push({ kind: "write", path: p("package.json"), how: `${name} pkg set`, content: args.join(" ") });
  } else if (name in INTERPRETERS && !(name === "python" && args[0] === "-m")) {
    const code =
      inlineScript(args, INTERPRETERS[name]!) ??
      (positional.length === 0 || args.includes("-") ? cmd.stdin : undefined);
    if (code !== undefined) out.push(...inlineEffects(code, (s) => shellEffects(s, depth + 1), p));
    else if (positional[0]) out.push({ kind: "read", path: p(positional[0]), how: `${name} script` });
  } else if (!["cd", "echo", "printf", "export", "base64", "xxd"].includes(name)) {
    // Anything else reads its path-like arguments: cat, head, grep, less, python script.py, ls.
    for (const a of positional) if (!a.includes("://")) out.push({ kind: "read", path: p(a), how: name });
  }
  return out;
}

function content(cmd: SimpleCommand): { content?: string } {
  if (cmd.stdin !== undefined) return { content: cmd.stdin };
  const name = basename(cmd.argv[0] ?? "");
  return name === "echo" || name === "printf" ? { content: cmd.argv.slice(1).join(" ") } : {};
}

/** `sed -i`, `perl -pi -e`, `awk -i inplace`: the script is the change, the remaining words the files. */
function inPlaceEdit(name: string, args: string[], p: (w: string) => string): Effect[] {
  const inPlace = args.some(
    (a) => /^(-i\S*|--in-place\S*|-\w*i\w*)$/.test(a) && !(name !== "perl" && a === "-e"),
  );
  const explicitScript = args.findIndex((a) => a === "-e" || a === "-f" || /^-\w*e$/.test(a));
  const scripts = explicitScript >= 0 ? [args[explicitScript + 1] ?? ""] : [];
  let files = args.filter((a, i) => !a.startsWith("-") && !(explicitScript >= 0 && i === explicitScript + 1));
  if (explicitScript < 0 && name !== "perl") {
    scripts.push(files[0] ?? "");
    files = files.slice(1);
  }
  if (name === "awk" || name === "gawk") files = files.filter((f) => f !== "inplace");
  const text = scripts.join("\n");
  return files.map((f) =>
    inPlace
      ? { kind: "write", path: p(f), how: `${name} in-place edit`, content: text }
      : { kind: "read", path: p(f), how: name },
  );
}

function gitEffects(allArgs: string[], outer: (w: string) => string): Effect[] {
  // `git -C dir ...` runs in dir; `-c key=value` and `--git-dir=...` are options before the command.
  let args = allArgs;
  let p = outer;
  while (args[0]?.startsWith("-")) {
    if (args[0] === "-C" && args[1] !== undefined) {
      const dir = outer(args[1]);
      p = (w: string) => normalizePath(w, dir);
      args = args.slice(2);
    } else args = args.slice(args[0] === "-c" ? 2 : 1);
  }
  const sub = args.find((a) => !a.startsWith("-")) ?? "";
  const rest = args.slice(args.indexOf(sub) + 1);
  const dashdash = rest.indexOf("--");
  const paths = dashdash >= 0 ? rest.slice(dashdash + 1) : rest.filter((a) => !a.startsWith("-"));
  const out: Effect[] = [];
  const refs = dashdash >= 0 ? rest.slice(0, dashdash) : rest;
  if (["reflog", "fetch", "pull", "cherry-pick", "fsck", "format-patch", "bundle"].includes(sub))
    out.push({ kind: "history", how: `git ${sub}` });
  if (
    [
      "log",
      "show",
      "diff",
      "checkout",
      "switch",
      "merge",
      "rebase",
      "reset",
      "restore",
      "rev-list",
      "branch",
      "grep",
      "whatchanged",
    ].includes(sub)
  ) {
    const bad = refs.find((r) => HISTORY_REF.test(r.split(":")[0]!) && !/^HEAD(\.\.HEAD)?$/.test(r));
    const earlier = ["show", "diff", "checkout", "reset", "restore", "switch", "grep"].includes(sub)
      ? refs.find((r) => EARLIER_REV.test(r.replace(/^--source=/, "").split(":")[0]!))
      : undefined;
    if (bad && !(sub === "branch" && !refs.some((r) => /^(-a|--all|-r|--remotes)$/.test(r))))
      out.push({ kind: "history", how: `git ${sub} ${bad}` });
    else if (earlier) out.push({ kind: "history", how: `git ${sub} ${earlier}` });
    else if (sub === "rev-list" || (sub === "log" && refs.some((r) => LOG_CONTENT.test(r))))
      out.push({ kind: "history", how: `git ${sub} ${refs.find((r) => LOG_CONTENT.test(r)) ?? ""}`.trim() });
  }
  if (sub === "cat-file" || (sub === "stash" && ["show", "list"].includes(rest[0] ?? "")))
    out.push({ kind: "history", how: `git ${sub}${sub === "stash" ? ` ${rest[0]}` : ""}` });
  if (["checkout", "restore", "rm", "mv", "reset", "apply", "am", "clean", "stash"].includes(sub)) {
    const targets =
      sub === "checkout" || sub === "reset"
        ? dashdash >= 0
          ? paths
          : paths.filter((a) => a.includes("/") || a.includes("."))
        : paths;
    for (const t of targets) out.push({ kind: "write", path: p(t), how: `git ${sub}` });
  }
  if (sub === "show") {
    for (const r of rest)
      if (r.includes(":")) out.push({ kind: "read", path: p(r.slice(r.indexOf(":") + 1)), how: "git show" });
  }
  return out;
}
