import type { Effect } from "./effect.ts";
import { urlHosts } from "./hosts.ts";

/** Calls in inline code that change files: everything its path literals name is then a write. */
const WRITE_API =
  /(open\s*\([^)]*,\s*(mode\s*=\s*)?f?["'][rwxab+]*[wax+]|\.write_(text|bytes)\s*\(|os\.(remove|unlink|rename|replace|rmdir|removedirs|truncate|chmod)|shutil\.(rmtree|move|copy\w*)|\.unlink\s*\(|\.rename\s*\(|\.rmdir\s*\(|\.touch\s*\(|(write|append)FileSync|(unlink|rm|rename|truncate)Sync|fs\.(promises\.)?(write|append|unlink|rm|rename)|File\.(write|delete)|unlink\s+|open\s*\(\s*\w+\s*,\s*["']>)/;
/** Calls that hand a string to a shell: their literals are parsed as shell commands. */
const SHELL_API = /(os\.system|os\.popen|subprocess\.\w+|execSync|spawnSync|exec\s*\(|system\s*\(|`)/;
/** Calls that reach the network: URL literals are then targets. */
const NETWORK_API =
  /(urllib|requests\.|urlopen|httpx|aiohttp|http\.client|socket\.|fetch\s*\(|https?\.get|LWP|Net::HTTP|open-uri|wget|curl)/;
const DECODE_API =
  /(b64decode|base64\.decodebytes|Buffer\.from\s*\([^)]*["']base64["']|decode_base64|atob\s*\()/;

const STRING_RE = /(["'])((?:\\.|(?!\1)[^\\\n])*)\1/g;

/**
 * Effects of code given inline to an interpreter (`python -c`, `node -e`, a heredoc fed to python).
 * Works on what the code does: path literals become writes when the code writes files, strings given
 * to `os.system`/`subprocess` are parsed as shell, base64 literals are decoded and judged too.
 */
export function inlineEffects(
  code: string,
  shell: (command: string) => Effect[],
  resolve: (path: string) => string,
  depth = 0,
): Effect[] {
  if (depth > 3) return [];
  const literals = [...code.matchAll(STRING_RE)].map((m) => unquoteLiteral(m[2]!));
  const out: Effect[] = [];
  const writes = WRITE_API.test(code);
  for (const lit of literals) {
    if (lit.includes("://") || !looksLikePath(lit)) continue;
    out.push(
      writes
        ? { kind: "write", path: resolve(lit), how: "inline code", content: code }
        : { kind: "read", path: resolve(lit), how: "inline code" },
    );
  }
  if (SHELL_API.test(code)) {
    const list = /\[\s*((?:["'][^"']*["']\s*,?\s*)+)\]/.exec(code);
    if (list)
      out.push(
        ...shell([...list[1]!.matchAll(STRING_RE)].map((m) => quote(unquoteLiteral(m[2]!))).join(" ")),
      );
    for (const lit of literals) if (lit.includes(" ")) out.push(...shell(lit));
  }
  if (NETWORK_API.test(code)) {
    for (const lit of literals)
      for (const host of urlHosts(lit)) out.push({ kind: "network", host, how: "inline code" });
  }
  if (DECODE_API.test(code)) {
    for (const lit of literals) {
      if (!/^[A-Za-z0-9+/=]{8,}$/.test(lit)) continue;
      const decoded = Buffer.from(lit, "base64").toString("utf8");
      out.push(...shell(decoded), ...inlineEffects(decoded, shell, resolve, depth + 1));
    }
  }
  return out;
}

function looksLikePath(text: string): boolean {
  if (text.length === 0 || text.length > 300 || /\s/.test(text)) return false;
  return text.includes("/") || /\.[A-Za-z0-9]{1,6}$/.test(text) || /^(tests?|solution|solutions)$/.test(text);
}

function unquoteLiteral(text: string): string {
  return text.replace(/\\(["'\\])/g, "$1").replace(/\\n/g, "\n");
}

function quote(word: string): string {
  return `'${word.replace(/'/g, "'\\''")}'`;
}
