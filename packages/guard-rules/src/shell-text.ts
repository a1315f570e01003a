/** Text-level steps before shell-quote sees a command line: heredocs, substitutions, newlines. */

/** Marks a heredoc's place; the number indexes the bodies that `extractHeredocs` collected. */
export const HEREDOC_MARK = "__BRIDLE_HEREDOC_";

/** Base64 text decoded, or undefined when it is not base64. */
export function decodeBase64(text: string): string | undefined {
  const clean = text.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/=_-]+$/.test(clean)) return undefined;
  return Buffer.from(clean, "base64").toString("utf8");
}

/** Hex digits decoded (`xxd -r -p`), or undefined when they are not hex. */
export function decodeHex(text: string): string | undefined {
  const clean = text.replace(/\s+/g, "");
  return /^[0-9a-fA-F]+$/.test(clean) ? Buffer.from(clean, "hex").toString("utf8") : undefined;
}

/** Replaces each heredoc (`<<EOF ... EOF`) by a here-string placeholder and keeps its body. */
export function extractHeredocs(text: string, bodies: string[]): string {
  const lines = text.split("\n");
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i]!;
    const pending: string[] = [];
    line = line.replace(/<<-?\s*(['"]?)([A-Za-z_][A-Za-z0-9_]*)\1/g, (_m, _q, delim: string) => {
      pending.push(delim);
      bodies.push("");
      return `<<< ${HEREDOC_MARK}${bodies.length - 1}`;
    });
    out.push(line);
    let index = bodies.length - pending.length;
    for (const delim of pending) {
      const body: string[] = [];
      while (i + 1 < lines.length && lines[i + 1]!.trim() !== delim) body.push(lines[++i]!);
      i++;
      bodies[index++] = body.join("\n");
    }
  }
  return out.join("\n");
}

/** Pulls out `$(...)` and backtick substitutions (parsed on their own) and leaves a placeholder. */
export function extractSubstitutions(
  text: string,
  found: string[],
  placeholder: (inner: string) => string,
): string {
  let out = "";
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quote === "'") {
      if (ch === "'") quote = undefined;
      out += ch;
      continue;
    }
    if (ch === "\\") {
      out += ch + (text[i + 1] ?? "");
      i++;
      continue;
    }
    if (ch === "'" && quote === undefined) quote = "'";
    else if (ch === '"') quote = quote === '"' ? undefined : '"';
    if ((ch === "$" || ch === "<" || ch === ">") && text[i + 1] === "(" && text[i + 2] !== "(") {
      const end = matchingParen(text, i + 1);
      found.push(text.slice(i + 2, end));
      out += placeholder(text.slice(i + 2, end));
      i = end;
      continue;
    }
    if (ch === "`") {
      const end = text.indexOf("`", i + 1);
      const stop = end === -1 ? text.length : end;
      found.push(text.slice(i + 1, stop));
      out += placeholder(text.slice(i + 1, stop));
      i = stop;
      continue;
    }
    out += ch;
  }
  return out;
}

function matchingParen(text: string, open: number): number {
  let level = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "(") level++;
    else if (text[i] === ")" && --level === 0) return i;
  }
  return text.length;
}

/** Newlines end commands, except inside quotes or after a backslash. */
export function newlinesToSemicolons(text: string): string {
  let out = "";
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === "\\" && quote !== "'") {
      if (text[i + 1] === "\n") {
        i++;
        continue;
      }
      out += ch + (text[i + 1] ?? "");
      i++;
      continue;
    }
    if ((ch === "'" || ch === '"') && (quote === undefined || quote === ch)) quote = quote ? undefined : ch;
    out += ch === "\n" && quote === undefined ? " ; " : ch;
  }
  return out;
}
