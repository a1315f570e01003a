import { parse } from "shell-quote";
import {
  decodeBase64,
  decodeHex,
  extractHeredocs,
  extractSubstitutions,
  HEREDOC_MARK,
  newlinesToSemicolons,
} from "./shell-text.ts";

/** One simple command of a shell line, after unwrapping `sudo`, `env`, `timeout` and the like. */
export interface SimpleCommand {
  /** Words with known variables expanded; an unknown variable stays as `${NAME}`. */
  argv: string[];
  /** File redirections: `>`, `>>`, `<`, `&>`; descriptor duplications such as `2>&1` are dropped. */
  redirects: { op: string; target: string }[];
  /** What the command reads on stdin when the guard can know it: a heredoc, a here-string, or the
   * decoded output of `echo ... | base64 -d` earlier in its pipeline. */
  stdin?: string;
  /** Environment assignments given as a prefix (`PIP_INDEX_URL=... pip install x`). */
  assigns?: Record<string, string>;
  /** True when stdin comes from an earlier pipeline stage whose output the guard cannot know. */
  stdinUnknown?: boolean;
}

const SEPARATORS = new Set([";", "&&", "||", "&", "|", "|&", "(", ")", ";;", "<(", ">("]);
const FILE_REDIRECTS = new Set([">", ">>", "<", "&>", "&>>", ">|", "<>"]);
const KEYWORDS = new Set(["if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!"]);
const WRAPPERS = new Set(["sudo", "nohup", "time", "command", "exec", "builtin", "setsid", "stdbuf", "nice"]);
const SHELLS = new Set(["sh", "bash", "zsh", "dash", "ksh", "ash", "busybox"]);
const MAX_DEPTH = 6;

/** Stands for a command substitution whose output the guard cannot know; reads well in notices. */
const SUBST = "{command-output}";

/**
 * Parses a shell command line into simple commands the rules can judge by what they do: `bash -c`,
 * `sh -c`, `eval` and command substitutions are parsed recursively; pipes, `&&`, `;` and newlines
 * split commands; env prefixes and `VAR=value; $VAR` are expanded; heredocs and base64 payloads
 * piped into a shell are decoded and parsed too.
 */
export function parseShell(text: string, depth = 0): SimpleCommand[] {
  if (depth > MAX_DEPTH) return [];
  const heredocs: string[] = [];
  const substitutions: string[] = [];
  let line = extractHeredocs(text, heredocs);
  line = extractSubstitutions(line, substitutions, (inner) => staticOutput(inner) ?? SUBST);
  line = newlinesToSemicolons(line);

  const out: SimpleCommand[] = [];
  for (const inner of substitutions) out.push(...parseShell(inner, depth + 1));
  const vars = new Map<string, string[]>();
  const tokens = parse(line, (name) => `\${${name}}`);
  let current = emptyCommand();
  let pipeline: SimpleCommand[] = [];
  let forVar: string | undefined;

  const finish = (separator: string | undefined) => {
    if (forVar !== undefined) {
      // `for f in a b; do ...`: later uses of $f stand for the listed words.
      vars.set(forVar, current.argv.slice(current.argv.indexOf("in") + 1));
      forVar = undefined;
    } else if (current.argv.length > 0 || current.redirects.length > 0) {
      const cmd = expandCommand(current, vars);
      if (cmd.argv.length > 0 || cmd.redirects.length > 0) {
        if (pipeline.length > 0) feedFromPipeline(cmd, pipeline);
        pipeline.push(cmd);
        out.push(...unwrap(cmd, depth));
      }
    }
    if (separator !== "|" && separator !== "|&") pipeline = [];
    current = emptyCommand();
  };

  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (typeof token === "string") {
      if (current.argv.length === 0 && KEYWORDS.has(token)) continue;
      if (current.argv.length === 0 && token === "for") {
        forVar = typeof tokens[i + 1] === "string" ? (tokens[i + 1] as string) : undefined;
        i++;
        continue;
      }
      const assign = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(token);
      if (assign && current.argv.length === 0) {
        const value = expandWord(assign[2]!, vars)[0] ?? "";
        vars.set(assign[1]!, [value]);
        current.assigns = { ...current.assigns, [assign[1]!]: value };
        continue;
      }
      current.argv.push(token);
    } else if ("comment" in token) {
      break;
    } else if ("pattern" in token && token.op === "glob") {
      current.argv.push(token.pattern);
    } else if ("op" in token) {
      const op = token.op as string;
      if (SEPARATORS.has(op)) finish(op);
      else if (op === "<<<") {
        const next = tokens[i + 1];
        i++;
        if (typeof next === "string") {
          current.stdin = next.startsWith(HEREDOC_MARK)
            ? (heredocs[Number(next.slice(HEREDOC_MARK.length))] ?? "")
            : next;
        }
      } else if (op === ">&" || op === "<&") {
        const next = tokens[i + 1];
        i++;
        dropDescriptorWord(current);
        if (typeof next === "string" && !/^\d+-?$/.test(next))
          current.redirects.push({ op: ">", target: next });
      } else if (FILE_REDIRECTS.has(op)) {
        const next = tokens[i + 1];
        i++;
        dropDescriptorWord(current);
        if (typeof next === "string") current.redirects.push({ op, target: next });
      }
    }
  }
  finish(undefined);
  return out;
}

function emptyCommand(): SimpleCommand {
  return { argv: [], redirects: [] };
}

/** `2>file`: shell-quote yields the descriptor as a word before the operator. */
function dropDescriptorWord(cmd: SimpleCommand): void {
  const last = cmd.argv.at(-1);
  if (last !== undefined && /^\d$/.test(last) && cmd.argv.length > 1) cmd.argv.pop();
}

function expandWord(word: string, vars: Map<string, string[]>): string[] {
  const whole = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(word);
  if (whole && vars.has(whole[1]!)) return vars.get(whole[1]!)!;
  return [
    word.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (m, name: string) => vars.get(name)?.join(" ") ?? m),
  ];
}

function expandCommand(cmd: SimpleCommand, vars: Map<string, string[]>): SimpleCommand {
  return {
    ...cmd,
    argv: cmd.argv.flatMap((w) => expandWord(w, vars)),
    redirects: cmd.redirects.map((r) => ({ op: r.op, target: expandWord(r.target, vars).join(" ") })),
  };
}

/** Strips wrappers so that `sudo env X=1 timeout 5 rm f` is judged as `rm f`; recurses into shells. */
function unwrap(cmd: SimpleCommand, depth: number): SimpleCommand[] {
  let argv = cmd.argv;
  for (let guard = 0; guard < 8 && argv.length > 0; guard++) {
    const [head, ...rest] = argv;
    const name = basename(head!);
    if (WRAPPERS.has(name)) argv = skipOptions(rest, name === "nice" ? ["-n"] : ["-u", "-g"]);
    else if (name === "env")
      argv = skipOptions(rest, ["-u"]).filter((_w, i, all) => !isAssignmentPrefix(all, i));
    else if (name === "timeout") argv = skipOptions(rest, ["-s", "-k"]).slice(1);
    else if (name === "xargs") argv = skipOptions(rest, ["-I", "-n", "-P", "-d", "-L", "-s", "-E"]);
    else break;
  }
  const base = { ...cmd, argv };
  const name = argv[0] ? basename(argv[0]) : "";
  const nested: SimpleCommand[] = [];
  if (SHELLS.has(name)) {
    const script = inlineScript(argv.slice(1), "-c");
    if (script !== undefined) nested.push(...parseShell(script, depth + 1));
    else if (argv.length === 1 || argv.slice(1).every((a) => a.startsWith("-"))) {
      if (cmd.stdin !== undefined) nested.push(...parseShell(cmd.stdin, depth + 1));
    }
  } else if (name === "eval") {
    nested.push(...parseShell(argv.slice(1).join(" "), depth + 1));
  }
  return [base, ...nested];
}

function isAssignmentPrefix(all: string[], index: number): boolean {
  return all.slice(0, index + 1).every((w) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(w));
}

function skipOptions(words: string[], withValue: string[]): string[] {
  let i = 0;
  while (i < words.length && words[i]!.startsWith("-")) {
    if (words[i] === "--") return words.slice(i + 1);
    i += withValue.includes(words[i]!) ? 2 : 1;
  }
  return words.slice(i);
}

/** The code given inline with `flag` (`-c`, `-e`), also inside combined flags such as `-lc`. */
export function inlineScript(args: string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (
      a === flag ||
      (a.startsWith("-") && !a.startsWith("--") && a.endsWith(flag.slice(1)) && a.length <= 4)
    ) {
      return args[i + 1];
    }
  }
  return undefined;
}

export function basename(word: string): string {
  const name = word.slice(word.lastIndexOf("/") + 1);
  return /^python[0-9.]*$/.test(name) ? "python" : name;
}

/** Works out what a pipeline stage receives when the producers are `echo`, `printf`, `base64 -d`, `xxd -r -p`. */
function feedFromPipeline(cmd: SimpleCommand, pipeline: SimpleCommand[]): void {
  let text: string | undefined;
  for (const stage of pipeline) {
    const [head, ...rest] = stage.argv.length > 0 ? stage.argv : [""];
    const name = basename(head ?? "");
    if (name === "echo" || name === "printf") text = rest.filter((w) => !/^-[neE]+$/.test(w)).join(" ");
    else if (stage.stdin !== undefined && (name === "cat" || name === "")) text = stage.stdin;
    else if (name === "base64" && rest.some((w) => /^(-d|--decode|-D)$/.test(w)))
      text = text === undefined ? undefined : decodeBase64(text);
    else if (name === "xxd" && rest.includes("-r")) text = text === undefined ? undefined : decodeHex(text);
    else if (name === "tr" || name === "rev" || name === "sed") text = undefined;
    else text = stage.stdin ?? undefined;
    if (text === undefined && !["echo", "printf"].includes(name)) break;
  }
  if (text !== undefined) cmd.stdin = text;
  else cmd.stdinUnknown = true;
}

/** The output of a substitution the guard can compute (`echo x`, `echo x | base64 -d`), quoted. */
function staticOutput(inner: string): string | undefined {
  const stages = parseShell(`${inner} | cat`, MAX_DEPTH).filter((c) => c.argv.length > 0);
  const last = stages.at(-1);
  if (!last || stages.length < 2 || last.stdin === undefined || /[\n'\0]/.test(last.stdin)) return undefined;
  return `'${last.stdin.trim()}'`;
}
