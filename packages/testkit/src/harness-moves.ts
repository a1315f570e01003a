/**
 * The scripted moves of `bridle harness check` and of the runner's harness tests: a bundled repair
 * task, the fix the scripted model writes, and each harness's own tool names and argument shapes.
 * What the scripted model server (a TEST DOUBLE) says in each harness, kept in one place.
 */

/** The check's task: a bundled repair task with a visible test, and the fix the script writes. */
export const CHECK_TASK = "repair-slugify-visible-test";
export const CHECK_FIX = [
  "import re",
  "import unicodedata",
  "",
  "",
  "def slugify(title):",
  '    ascii_text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()',
  '    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")',
  "",
].join("\n");

export interface HarnessMoves {
  read: object;
  write: object;
  run: (command: string) => object;
}

/** Each harness's own tool names and argument shapes for: read a file, write it, run a command. */
export const checkMoves: Record<string, HarnessMoves> = {
  pi: {
    read: { name: "read", arguments: { path: "slug.py" } },
    write: { name: "write", arguments: { path: "slug.py", content: CHECK_FIX } },
    run: (command) => ({ name: "bash", arguments: { command } }),
  },
  opencode: {
    read: { name: "read", arguments: { filePath: "/app/slug.py" } },
    write: { name: "write", arguments: { filePath: "/app/slug.py", content: CHECK_FIX } },
    run: (command) => ({ name: "bash", arguments: { command, description: "run it" } }),
  },
  hermes: {
    read: { name: "read_file", arguments: { path: "slug.py" } },
    write: { name: "write_file", arguments: { path: "slug.py", content: CHECK_FIX } },
    run: (command) => ({ name: "terminal", arguments: { command } }),
  },
  "claude-code": {
    read: { name: "Read", arguments: { file_path: "/app/slug.py" } },
    write: { name: "Write", arguments: { file_path: "/app/slug.py", content: CHECK_FIX } },
    run: (command) => ({ name: "Bash", arguments: { command } }),
  },
};
