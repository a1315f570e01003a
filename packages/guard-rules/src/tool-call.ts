import type { Effect } from "./effect.ts";
import { shellEffects } from "./effects.ts";
import { hostOfWord } from "./hosts.ts";
import { normalizePath } from "./paths.ts";

const COMMAND_KEYS = ["command", "cmd", "script", "shell_command", "bash_command", "code_to_run"];
const PATH_KEYS = [
  "path",
  "file_path",
  "filePath",
  "filename",
  "file",
  "target_file",
  "notebook_path",
  "dir",
  "directory",
];
const URL_KEYS = ["url", "uri", "href", "endpoint"];
const CONTENT_KEYS = [
  "content",
  "new_string",
  "newString",
  "newText",
  "new_str",
  "text",
  "file_text",
  "contents",
  "replacement",
];
/** Tool names that change the files they are given. */
const WRITING_TOOL =
  /(write|edit|patch|create|replace|delete|remove|move|rename|insert|append|save|str_replace|apply)/i;
/** Tools that run code in a language other than shell. */
const PYTHON_TOOL = /^(python|execute_python|run_python|ipython|jupyter)$/i;

/**
 * What a harness's tool call would do, whatever the harness: shell tools (`bash`, `Bash`,
 * `terminal`, `exec_command`) are parsed as shell; file tools (`read`, `Write`, `edit`,
 * `apply_patch`, `write_file`, `patch`) give reads and writes; fetch tools give network targets.
 * Recognised by argument names, so a new harness's tools are judged without a table of names.
 */
export function toolCallEffects(tool: string, args: Record<string, unknown>): Effect[] {
  const out: Effect[] = [];
  const strings = (key: string) => {
    const v = args[key];
    return typeof v === "string"
      ? [v]
      : Array.isArray(v)
        ? v.filter((x): x is string => typeof x === "string")
        : [];
  };
  for (const key of COMMAND_KEYS) {
    for (const command of strings(key)) {
      out.push(
        ...(PYTHON_TOOL.test(tool)
          ? shellEffects(`python -c ${shellQuote(command)}`)
          : shellEffects(command)),
      );
    }
  }
  if (PYTHON_TOOL.test(tool))
    for (const code of strings("code")) out.push(...shellEffects(`python -c ${shellQuote(code)}`));

  const newText = [...CONTENT_KEYS.flatMap(strings), ...editTexts(args.edits)].join("\n");
  const writes = WRITING_TOOL.test(tool);
  for (const key of [...PATH_KEYS, "paths", "source", "destination", "old_path", "new_path"]) {
    for (const raw of strings(key)) {
      const path = normalizePath(raw);
      out.push(
        writes ? { kind: "write", path, how: tool, content: newText } : { kind: "read", path, how: tool },
      );
    }
  }
  for (const key of ["patch", "patchText", "patch_text", "input", "diff"]) {
    for (const text of strings(key)) out.push(...patchEffects(text, tool));
  }
  for (const key of URL_KEYS) {
    for (const url of strings(key)) {
      const host = hostOfWord(url, true);
      if (host) out.push({ kind: "network", host, how: tool });
    }
  }
  return out;
}

function editTexts(edits: unknown): string[] {
  if (!Array.isArray(edits)) return [];
  return edits.flatMap((e) => {
    if (typeof e !== "object" || e === null) return [];
    const rec = e as Record<string, unknown>;
    return [rec.newText, rec.newString, rec.new_string, rec.new_str, rec.replacement].filter(
      (x): x is string => typeof x === "string",
    );
  });
}

/** Files named by a patch: `*** Update File: x` (apply_patch) and `+++ b/x` (unified diff). */
function patchEffects(text: string, tool: string): Effect[] {
  const out: Effect[] = [];
  const re =
    /^(?:\*\*\* (?:Add|Update|Delete) File: (.+)|\+\+\+ (?:b\/)?(.+)|--- (?:a\/)?(.+)|\*\*\* Move to: (.+))$/gm;
  for (const m of text.matchAll(re)) {
    const file = (m[1] ?? m[2] ?? m[3] ?? m[4] ?? "").trim();
    if (file && file !== "/dev/null")
      out.push({ kind: "write", path: normalizePath(file), how: tool, content: text });
  }
  return out;
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, "'\\''")}'`;
}
