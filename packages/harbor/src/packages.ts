import type { TreeFile } from "./files.ts";

/**
 * The Python packages a task's scripts install at run time, where Harbor's containers reach PyPI
 * and Bridle's sandboxes do not: `pip install`, `uv pip install`, `uv add`, `uv tool install`, and
 * `--with`/`-w`/`--from` of `uvx` and `uv run`. One list per command, as each is resolved on its
 * own (a test.sh that pins `pandas==2.3.0` and a solve.sh that asks for any `pandas` both stand).
 * Only plain requirements count: names with an optional extra and version, never files, URLs,
 * `-r` lists or index options (what they name is not a package to fetch).
 */
export function scriptRequirements(script: string): RequirementGroup[] {
  const groups: RequirementGroup[] = [];
  // Continuations joined; comments and what follows a command's end are not its arguments.
  for (const line of script.replace(/\\\r?\n/g, " ").split(/\r?\n|&&|\|\||;|\|/)) {
    const words = line
      .replace(/(^|\s)#.*$/, "")
      .trim()
      .split(/\s+/)
      .filter(Boolean);
    const group = requirementsOf(words);
    if (group.requirements.length > 0) groups.push(group);
  }
  return groups;
}

/** What one install command asks for, and the Python it asks uv for (`uvx -p 3.13`), if any. */
export interface RequirementGroup {
  requirements: string[];
  /** A version such as 3.13, where the command names one; else the sandbox's python3. */
  python?: string;
}

/** Options of pip and uv that take the next word as their value. */
const TAKES_VALUE = new Set([
  "-r",
  "--requirement",
  "-c",
  "--constraint",
  "-e",
  "--editable",
  "-i",
  "--index-url",
  "--extra-index-url",
  "--index",
  "--default-index",
  "-f",
  "--find-links",
  "-t",
  "--target",
  "--prefix",
  "--root",
  "-p",
  "--python",
  "--group",
  "--extra",
  "--directory",
  "--project",
  "--cache-dir",
  "--only-binary",
  "--no-binary",
  "--platform",
  "--python-version",
  "--trusted-host",
  "--timeout",
  "--retries",
]);

const REQUIREMENT =
  /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9,._-]+\])?(?:(?:==|>=|<=|~=|!=|>|<)[A-Za-z0-9.*+!-]+(?:,(?:==|>=|<=|~=|!=|>|<)[A-Za-z0-9.*+!-]+)*)?$/;

function unquote(word: string): string {
  return word.replace(/^(['"])(.*)\1$/, "$2");
}

function requirementsOf(words: string[]): RequirementGroup {
  const at = installStart(words);
  if (at === -1) return { requirements: [] };
  const out: string[] = [];
  let python: string | undefined;
  const withValues = isUvRun(words);
  for (let i = at; i < words.length; i++) {
    const word = unquote(words[i] as string);
    if (/^[<>]/.test(word)) break;
    if (withValues) {
      // uvx and uv run: only what --with, -w and --from name; the rest is the command to run.
      const eq = word.indexOf("=");
      const flag = eq === -1 ? word : word.slice(0, eq);
      const inline = eq === -1 ? undefined : word.slice(eq + 1);
      if (flag === "--with" || flag === "-w" || flag === "--from") {
        const value = inline ?? unquote(words[++i] ?? "");
        for (const part of value.split(",")) if (REQUIREMENT.test(part)) out.push(part);
      } else if (flag === "-p" || flag === "--python") {
        const value = inline ?? unquote(words[++i] ?? "");
        if (/^3\.\d+$/.test(value)) python = value;
      } else if (!word.startsWith("-")) break;
      else if (TAKES_VALUE.has(flag) && inline === undefined) i++;
      continue;
    }
    if (word.startsWith("-")) {
      if (TAKES_VALUE.has(word)) i++;
      continue;
    }
    // Upgrading the installer itself fetches nothing a test or solution imports.
    if (REQUIREMENT.test(word) && requirementName(word) !== "pip") out.push(word);
  }
  return python === undefined ? { requirements: out } : { requirements: out, python };
}

/** Where a command's package arguments begin, or -1 when it installs nothing from an index. */
function installStart(words: string[]): number {
  const bin = (w: string | undefined) => (w ?? "").split("/").pop() ?? "";
  let i = 0;
  while (i < words.length && (/^[A-Z_][A-Z0-9_]*=/.test(words[i] as string) || words[i] === "sudo")) i++;
  const first = bin(words[i]);
  const next = words[i + 1];
  if (/^pip3?(\.\d+)?$/.test(first) && next === "install") return i + 2;
  if (/^python3?(\.\d+)?$/.test(first) && next === "-m" && /^pip3?$/.test(words[i + 2] ?? "")) {
    return words[i + 3] === "install" ? i + 4 : -1;
  }
  if (first === "uv") {
    if (next === "pip" && words[i + 2] === "install") return i + 3;
    if (next === "add") return i + 2;
    if (next === "tool" && words[i + 2] === "install") return i + 3;
    if (next === "run" || (next === "tool" && words[i + 2] === "run")) return i + 2;
  }
  if (first === "uvx") return i + 1;
  return -1;
}

/** uvx, `uv run` and `uv tool run`: a command follows, and only their --with, -w and --from name packages. */
function isUvRun(words: string[]): boolean {
  const i = words.findIndex((w) => !/^[A-Z_][A-Z0-9_]*=/.test(w) && w !== "sudo");
  const first = (words[i] ?? "").split("/").pop();
  const next = words[i + 1];
  return (
    first === "uvx" || (first === "uv" && (next === "run" || (next === "tool" && words[i + 2] === "run")))
  );
}

/** The name a requirement installs, normalised as PyPI compares names. */
export function requirementName(requirement: string): string {
  return (requirement.match(/^[A-Za-z0-9._-]+/)?.[0] ?? requirement).toLowerCase().replace(/[-_.]+/g, "-");
}

/**
 * What the task's shell scripts (tests and solutions, every step's too) install, less what the
 * verifier toolchain already holds (`pins`: name to version), without repeats. A group is dropped
 * when every requirement in it is a toolchain package, unpinned or pinned to its version.
 */
export function taskRequirements(
  scripts: readonly TreeFile[],
  pins: ReadonlyMap<string, string>,
): RequirementGroup[] {
  const seen = new Set<string>();
  const out: RequirementGroup[] = [];
  for (const file of scripts) {
    if (!file.path.endsWith(".sh")) continue;
    for (const group of scriptRequirements(file.content.toString("utf8"))) {
      // The toolchain's wheels are pure Python: they serve any Python a command asks for.
      const held = group.requirements.every((req) => {
        const pin = pins.get(requirementName(req));
        const version = req.match(/==([^,]+)$/)?.[1];
        return pin !== undefined && (version === undefined ? !/[<>=!~]/.test(req) : version === pin);
      });
      const key = `${group.python ?? ""} ${group.requirements.join(" ")}`;
      if (held || seen.has(key)) continue;
      seen.add(key);
      out.push(group);
    }
  }
  return out;
}

/** The toolchain's pins (`name==version` lines of its tools.txt), by normalised name. */
export function toolchainPins(toolsTxt: string): Map<string, string> {
  const pins = new Map<string, string>();
  for (const line of toolsTxt.split("\n")) {
    const m = line.trim().match(/^([A-Za-z0-9._-]+)==(\S+)$/);
    if (m) pins.set(requirementName(m[1] as string), m[2] as string);
  }
  return pins;
}
