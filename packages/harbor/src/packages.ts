import type { TreeFile } from "./files.ts";

/**
 * The Python packages a task's scripts install at run time, where Harbor's containers reach PyPI
 * and Bridle's sandboxes do not: `pip install`, `uv pip install`, `uv add`, `uv tool install`,
 * `--with`/`-w`/`--from` of `uvx` and `uv run`, and the tool that `uvx` and `uv tool run` run. One list per command, as each is resolved on its
 * own (a test.sh that pins `pandas==2.3.0` and a solve.sh that asks for any `pandas` both stand).
 * Only plain requirements count: names with an optional extra and version, never files, URLs,
 * `-r` lists or index options (what they name is not a package to fetch).
 */
export function scriptRequirements(script: string): RequirementGroup[] {
  return commandsOf(script)
    .map(requirementsOf)
    .filter((group) => group.requirements.length > 0);
}

/**
 * A shell script's simple commands as their words: continuations joined, split at newlines, `&&`,
 * `||`, `;` and pipes; comments and what follows a command's end are not its arguments.
 */
function commandsOf(script: string): string[][] {
  return script
    .replace(/\\\r?\n/g, " ")
    .split(/\r?\n|&&|\|\||;|\|/)
    .map((line) =>
      line
        .replace(/(^|\s)#.*$/, "")
        .trim()
        .split(/\s+/)
        .filter(Boolean),
    );
}

/** Where a command's own words begin: after variables given to it and `sudo`. */
function commandStart(words: string[]): number {
  let i = 0;
  while (i < words.length && (/^[A-Z_][A-Z0-9_]*=/.test(words[i] as string) || words[i] === "sudo")) i++;
  return i;
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
  const command = installCommand(words);
  if (!command) return { requirements: [] };
  const out: string[] = [];
  let python: string | undefined;
  let from = false;
  for (let i = command.start; i < words.length; i++) {
    const word = unquote(words[i] as string);
    if (/^[<>]/.test(word)) break;
    if (command.runs) {
      // uvx and uv run: only what --with, -w and --from name; the rest is the command to run.
      const eq = word.indexOf("=");
      const flag = eq === -1 ? word : word.slice(0, eq);
      const inline = eq === -1 ? undefined : word.slice(eq + 1);
      if (flag === "--with" || flag === "-w" || flag === "--from") {
        const value = inline ?? unquote(words[++i] ?? "");
        for (const part of value.split(",")) if (REQUIREMENT.test(part)) out.push(part);
        from ||= flag === "--from";
      } else if (flag === "-p" || flag === "--python") {
        const value = inline ?? unquote(words[++i] ?? "");
        if (/^3\.\d+$/.test(value)) python = value;
      } else if (!word.startsWith("-")) {
        // The tool uvx runs comes from the package of its name (`name@version` pins it), unless
        // --from names another; `python` runs the interpreter.
        const tool = command.tool && !from ? toolRequirement(word) : null;
        if (tool && !out.some((req) => requirementName(req) === requirementName(tool))) out.push(tool);
        break;
      } else if (TAKES_VALUE.has(flag) && inline === undefined) i++;
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

/**
 * Where a command's package arguments begin, and whether it runs a command after them (uvx,
 * `uv run`, `uv tool run`: then only --with, -w and --from name packages); null when it installs
 * nothing from an index.
 */
function installCommand(words: string[]): { start: number; runs: boolean; tool?: boolean } | null {
  const i = commandStart(words);
  const first = (words[i] ?? "").split("/").pop() ?? "";
  const next = words[i + 1];
  const installs = (start: number) => ({ start, runs: false });
  if (/^pip3?(\.\d+)?$/.test(first) && next === "install") return installs(i + 2);
  if (/^python3?(\.\d+)?$/.test(first) && next === "-m" && /^pip3?$/.test(words[i + 2] ?? "")) {
    return words[i + 3] === "install" ? installs(i + 4) : null;
  }
  if (first === "uv") {
    if (next === "pip" && words[i + 2] === "install") return installs(i + 3);
    if (next === "add") return installs(i + 2);
    if (next === "tool" && words[i + 2] === "install") return installs(i + 3);
    if (next === "run") return { start: i + 2, runs: true };
    if (next === "tool" && words[i + 2] === "run") return { start: i + 3, runs: true, tool: true };
  }
  if (first === "uvx") return { start: i + 1, runs: true, tool: true };
  return null;
}

/** The package of a tool uvx runs (`ruff`, `ruff@0.6.9`, `ruff@latest`); null for `python`. */
function toolRequirement(word: string): string | null {
  const [name = "", version] = word.split("@");
  if (/^python(\d+(\.\d+)*)?$/.test(name)) return null;
  const requirement = version && version !== "latest" ? `${name}==${version}` : name;
  return REQUIREMENT.test(requirement) ? requirement : null;
}

/** The name a requirement installs, normalised as PyPI compares names. */
export function requirementName(requirement: string): string {
  return (requirement.match(/^[A-Za-z0-9._-]+/)?.[0] ?? requirement).toLowerCase().replace(/[-_.]+/g, "-");
}

/**
 * What the task's shell scripts (tests and solutions, every step's too) install, less what the
 * verifier toolchain's wheels already hold (`wheels`, see wheelsHeld), without repeats. A group is
 * dropped when every requirement in it is a toolchain wheel, unpinned or pinned to its version,
 * and, for a group that asks uv for another Python, a pure-Python one.
 */
export function taskRequirements(
  scripts: readonly TreeFile[],
  wheels: ReadonlyMap<string, HeldWheel>,
): RequirementGroup[] {
  const seen = new Set<string>();
  const out: RequirementGroup[] = [];
  for (const file of scripts) {
    if (!file.path.endsWith(".sh")) continue;
    for (const group of scriptRequirements(file.content.toString("utf8"))) {
      const held = group.requirements.every((req) => {
        const wheel = wheels.get(requirementName(req));
        const version = req.match(/==([^,]+)$/)?.[1];
        if (!wheel || (group.python !== undefined && !wheel.pure)) return false;
        return version === undefined ? !/[<>=!~]/.test(req) : version === wheel.version;
      });
      const key = `${group.python ?? ""} ${group.requirements.join(" ")}`;
      if (held || seen.has(key)) continue;
      seen.add(key);
      out.push(group);
    }
  }
  return out;
}

/** A wheel at hand: its version, and whether it serves any Python (`py3-none-any`). */
export interface HeldWheel {
  version: string;
  pure: boolean;
}

/** The project a wheel file installs, normalised (`PyYAML-6.0.2-cp311-...whl` -> `pyyaml`). */
export const wheelName = (file: string) => requirementName(file.split("-")[0] ?? "");

/** Wheel files (a folder's listing) by the project they install; other files are passed over. */
export function wheelsHeld(files: readonly string[]): Map<string, HeldWheel> {
  const held = new Map<string, HeldWheel>();
  for (const file of files) {
    const [, version] = file.split("-");
    if (!file.endsWith(".whl") || !version) continue;
    held.set(wheelName(file), { version, pure: file.endsWith("-none-any.whl") });
  }
  return held;
}

/** A Debian package as apt is asked for it: a name, an architecture and a version, optional. */
const DEB = /^[a-z0-9][a-z0-9+.-]+(?::[a-z0-9]+)?(?:=[A-Za-z0-9.+~:*-]+)?$/;

/** Options of apt and apt-get that take the next word as their value. */
const APT_TAKES_VALUE = new Set(["-o", "--option", "-c", "--config-file", "-t", "--target-release"]);

/**
 * The Debian packages a script installs with apt at run time (`apt-get install`, `apt install`,
 * options anywhere, `sudo` and variables before), where Harbor's containers reach Debian's mirrors
 * and Bridle's sandboxes do not. Only names (with an architecture or version): never files, globs
 * or variables.
 */
export function scriptDebianPackages(script: string): string[] {
  const out: string[] = [];
  for (const command of commandsOf(script)) {
    const words = command.map(unquote);
    let i = commandStart(words);
    if (!["apt-get", "apt"].includes((words[i] ?? "").split("/").pop() ?? "")) continue;
    let installing = false;
    for (i++; i < words.length; i++) {
      const word = words[i] as string;
      if (/^[<>]/.test(word)) break;
      if (word.startsWith("-")) {
        if (APT_TAKES_VALUE.has(word)) i++;
        continue;
      }
      if (!installing) {
        if (word !== "install") break;
        installing = true;
      } else if (DEB.test(word)) out.push(word);
    }
  }
  return out;
}

/** What the task's shell scripts install with apt, without repeats, in the order first named. */
export function taskDebianPackages(scripts: readonly TreeFile[]): string[] {
  const all = scripts
    .filter((f) => f.path.endsWith(".sh"))
    .flatMap((f) => scriptDebianPackages(f.content.toString("utf8")));
  return [...new Set(all)];
}

/** What scripts install with npm: from a project's package.json (a bare `npm install`), and by name. */
export interface NpmInstalls {
  project: boolean;
  packages: string[];
}

/** An npm package as a script names it to install: `jest`, `jest@^29.6.4`, `@babel/core@7`. */
const NPM_PACKAGE = /^(?:@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*(?:@[A-Za-z0-9.^~<>=*|+ -]+)?$/;

/** Options of npm install that take the next word as their value. */
const NPM_TAKES_VALUE = new Set(["--prefix", "--cache", "--registry", "--tag", "-w", "--workspace"]);

/**
 * What a script installs with npm at run time (`npm install`, `npm i`, `npm ci`, `npm add`, with
 * options anywhere), where Harbor's containers reach the npm registry and Bridle's sandboxes do
 * not: a bare install is the project's (its package.json), else the packages named. Only names
 * and versions: never paths, tarballs, git URLs or variables.
 */
export function scriptNpmInstalls(script: string): NpmInstalls {
  const found: NpmInstalls = { project: false, packages: [] };
  for (const command of commandsOf(script)) {
    const words = command.map(unquote);
    let i = commandStart(words);
    if ((words[i] ?? "").split("/").pop() !== "npm") continue;
    const verb = words[i + 1];
    if (!["install", "i", "ci", "add"].includes(verb ?? "")) continue;
    const named: string[] = [];
    for (i += 2; i < words.length; i++) {
      const word = words[i] as string;
      if (/^[<>]/.test(word)) break;
      if (word.startsWith("-")) {
        if (NPM_TAKES_VALUE.has(word)) i++;
        continue;
      }
      if (NPM_PACKAGE.test(word)) named.push(word);
    }
    if (named.length === 0) found.project = true;
    found.packages.push(...named);
  }
  return found;
}

/** What the task's shell scripts install with npm, packages without repeats, in the order first named. */
export function taskNpmInstalls(scripts: readonly TreeFile[]): NpmInstalls {
  const each = scripts
    .filter((f) => f.path.endsWith(".sh"))
    .map((f) => scriptNpmInstalls(f.content.toString("utf8")));
  return {
    project: each.some((e) => e.project),
    packages: [...new Set(each.flatMap((e) => e.packages))],
  };
}
