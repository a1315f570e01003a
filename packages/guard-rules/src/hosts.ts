/** Network targets: URLs, `git@host:` remotes, and bare host names given to network programs. */

const URL_RE = /\b[a-z][a-z0-9+.-]*:\/\/[^\s'"<>`)\]]+/gi;
const SCP_REMOTE_RE = /^(?:[\w.-]+@)?([a-z0-9-]+(?:\.[a-z0-9-]+)+):/i;
const DOMAIN_RE = /\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24}\b/gi;
const IPV4_RE = /\b\d{1,3}(?:\.\d{1,3}){3}\b/g;

/** File endings that look like top-level domains: `out.json` is a file, not a host. */
const FILE_ENDINGS = new Set(
  "py js ts tsx jsx mjs cjs json txt md sh html htm css csv tsv yaml yml toml lock log tar gz tgz bz2 xz zip whl xml cfg ini out go rs rb java kt c h cc cpp hpp so o pyc ipynb png jpg jpeg gif svg pdf env conf rst lua php pl sql db sqlite patch diff".split(
    " ",
  ),
);

/** The host of every URL in a text (`https://h/x`, `git+https://h/x`, `ssh://git@h/x`). */
export function urlHosts(text: string): string[] {
  const hosts: string[] = [];
  for (const match of text.matchAll(URL_RE)) {
    const host = hostOfUrl(match[0]);
    if (host) hosts.push(host);
  }
  return hosts;
}

function hostOfUrl(url: string): string | undefined {
  const withoutScheme = url.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
  const authority = withoutScheme.split(/[/?#]/)[0] ?? "";
  const host = authority.slice(authority.lastIndexOf("@") + 1);
  const bracketed = /^\[([^\]]+)\]/.exec(host);
  if (bracketed) return bracketed[1]!.toLowerCase();
  const name = host.replace(/:\d*$/, "").toLowerCase();
  return name.length > 0 && !name.includes("$") ? name : undefined;
}

/** The host a single command word points at, when it is a URL, a scp-style remote or a domain. */
export function hostOfWord(word: string, allowBare: boolean): string | undefined {
  const urls = urlHosts(word);
  if (urls.length > 0) return urls[0];
  const scp = SCP_REMOTE_RE.exec(word);
  if (scp && !word.includes("://")) return scp[1]!.toLowerCase();
  if (!allowBare || word.startsWith("-")) return undefined;
  const bare = /^(?:[\w.-]+@)?([a-z0-9-]+(?:\.[a-z0-9-]+)+)(?::\d+)?(?:\/.*)?$/i.exec(word);
  if (!bare) return undefined;
  const host = bare[1]!.toLowerCase();
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(host)) return host;
  const tld = host.slice(host.lastIndexOf(".") + 1);
  return FILE_ENDINGS.has(tld) || /^\d+$/.test(tld) ? undefined : host;
}

/** Every host a text names: URL hosts, bare domains and IPv4 addresses. */
export function mentionedHosts(texts: string[]): Set<string> {
  const found = new Set<string>();
  for (const text of texts) {
    for (const host of urlHosts(text)) found.add(host);
    for (const m of text.matchAll(DOMAIN_RE)) found.add(m[0].toLowerCase());
    for (const m of text.matchAll(IPV4_RE)) found.add(m[0]);
  }
  return found;
}

/** A host is allowed when it, or a domain it belongs to, is mentioned or allowed. */
export function hostAllowed(host: string, allowed: Set<string>): boolean {
  const h = host.toLowerCase().replace(/\.$/, "");
  if (allowed.has(h)) return true;
  for (const a of allowed) {
    if (a.includes(".") && h.endsWith(`.${a}`)) return true;
  }
  return false;
}
