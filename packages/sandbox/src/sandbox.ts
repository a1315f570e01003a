import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import {
  chmod,
  cp,
  lchown,
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  rm,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, posix, resolve } from "node:path";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { unpackFolder } from "./archive.ts";
import { Cgroup, processAlive } from "./cgroup.ts";
import { SANDBOX_PATH, SYSTEM_DIRS, systemMountArgs } from "./host.ts";
import { LEASES, takeLease } from "./lease.ts";
import type { SharedNetwork } from "./network.ts";
import { TailBuffer } from "./output.ts";

/** Where the workspace appears inside the sandbox unless a task names another (Harbor's default). */
export const WORKSPACE = "/app";

/** A run that could not be set up as asked (nothing was started): the caller's environment failure. */
export class SandboxSetupError extends Error {}

/** Paths a task's workdir may not be, or be under: the system, and what Bridle mounts itself. */
const RESERVED = [
  ...SYSTEM_DIRS,
  "/proc",
  "/dev",
  "/sys",
  "/tmp",
  "/run",
  "/tests",
  "/solution",
  "/logs",
  "/oracle",
  "/opt/bridle",
  "/home/agent",
];

/**
 * Why `path` cannot be a sandbox's workdir, or null when it can: an absolute, normalised path
 * that is neither the root nor one of (or under) the system folders and Bridle's own mounts.
 */
export function workdirProblem(path: string): string | null {
  if (!path.startsWith("/")) return `workdir ${JSON.stringify(path)} is not an absolute path`;
  if (posix.normalize(path) !== path || (path.endsWith("/") && path !== "/"))
    return `workdir ${JSON.stringify(path)} is not a normalised path (write ${JSON.stringify(posix.normalize(path).replace(/(.)\/$/, "$1"))})`;
  if (path === "/") return "workdir / would hide the system: name a folder";
  if (!/^[A-Za-z0-9._/-]+$/.test(path))
    return `workdir ${JSON.stringify(path)} holds characters other than letters, digits and ._-/`;
  const clash = RESERVED.find((r) => path === r || path.startsWith(`${r}/`));
  return clash
    ? `workdir ${path} is ${path === clash ? "" : "under "}${clash}, which the sandbox keeps for the system or its own mounts`
    : null;
}
/** Where the guard's socket and the relay script appear inside the sandbox. */
export const GUARD_SOCKET = "/run/bridle/guard.sock";
const RELAY_SCRIPT = "/run/bridle/relay.mjs";
const relayOnHost = join(dirname(fileURLToPath(import.meta.url)), "relay.mjs");

const SANDBOX_PREFIX = "bridle-sbx-";

/** What `Sandbox.reapOrphans` found of owners that died mid-run. */
export interface Orphans {
  /** cgroups reaped: any process still inside was killed first. */
  groups: string[];
  /** Sandbox folders removed. */
  folders: string[];
}

/**
 * A container image's root filesystem as the sandbox's system, instead of the host's folders. The
 * sandbox sees it through an overlay whose writable layer is its own (`Sandbox.changes`), so what a
 * run changes outside the workspace (a package installed, a file under /etc) stays for the next run
 * of the same sandbox and never reaches the image. Needs root (the overlay is mounted in a private
 * mount namespace of each run).
 */
export interface SandboxImage {
  /** The image's unpacked root filesystem on the host, never written. */
  rootfs: string;
  /** The image's environment (Dockerfile `ENV`): under what a run sets, over the sandbox's defaults. */
  env?: Record<string, string>;
  /**
   * The image's ENTRYPOINT: it runs at the start of every run, as a container's main process, and
   * the command beside it (a service it starts is there for the agent's run and for the tests').
   */
  entrypoint?: string[] | null;
  /**
   * Layers over the image, read-only, top first: another sandbox's `changes`, so the verifier
   * sees everything the agent changed, not only its workspace.
   */
  layers?: string[];
}

/** The /etc/hosts of an image sandbox, as an engine writes a container's (its host name is `sandbox`). */
const IMAGE_HOSTS = [
  "127.0.0.1\tlocalhost",
  "::1\tlocalhost ip6-localhost ip6-loopback",
  "127.0.1.1\tsandbox",
  "",
].join("\n");

/** TCP sockets listening in the run's network namespace (its loopback: the relay, and what the entrypoint serves). */
const LISTENERS = "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -c ' 0A '";

/**
 * Beside the image's ENTRYPOINT, as an engine runs a container and then `exec`s into it: the
 * entrypoint starts in the background as the container's main process, with `sleep infinity` for
 * its command (what Harbor and Terminal-Bench give their containers), its output in
 * /tmp/bridle-entrypoint.log as an engine keeps a container's log apart. The command runs once
 * what the entrypoint starts listens on a port of its own, as a container has long been up before
 * anything runs in it, or once the entrypoint has ended (a failed or self-deleted one is passed
 * over), and at most 3 s after it started: an entrypoint that serves nothing costs the 3 s.
 */
function besideEntrypoint(entrypoint: string[]): string {
  const quoted = [...entrypoint, "sleep", "infinity"].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  return [
    `before=$(${LISTENERS})`,
    `(exec ${quoted}) </dev/null >/tmp/bridle-entrypoint.log 2>&1 &`,
    "ep=$!",
    "i=0",
    'while [ "$i" -lt 30 ]; do',
    '  grep -q "^State:[[:space:]]*[^Z]" "/proc/$ep/status" 2>/dev/null || break',
    `  [ "$(${LISTENERS})" -gt "$before" ] && break`,
    "  sleep 0.1; i=$((i+1))",
    "done",
    'exec "$@"',
  ].join("\n");
}

/** Where a run that reports what it left running writes the names (see LEFT_RUNNING). */
const LEFT_RUNNING_FILE = "/run/bridle/left-running";

/**
 * Around a command whose leftovers are reported: notes the processes there before it (the
 * sandbox's own, what the entrypoint serves), runs it, lets what it just forked settle (a shell
 * between fork and exec, a daemon's first fork) for 0.2 s, then writes the names of the processes
 * that are new and still alive to LEFT_RUNNING_FILE and exits with the command's status. Builtins
 * only while listing, so the list holds no helper of its own.
 */
const LEFT_RUNNING = `before=" $(cd /proc && echo [0-9]*) "; "$@"; status=$?; sleep 0.2 2>/dev/null; { for p in /proc/[0-9]*; do p=\${p#/proc/}; case "$before" in *" $p "*) continue ;; esac; [ "$p" = "$$" ] || { read -r name < "/proc/$p/comm" && echo "$name"; }; done; } 2>/dev/null > ${LEFT_RUNNING_FILE}; exit $status`;

/** The capabilities a container engine gives a container's root by default. */
const CONTAINER_CAPABILITIES = [
  "CAP_CHOWN",
  "CAP_DAC_OVERRIDE",
  "CAP_FOWNER",
  "CAP_FSETID",
  "CAP_KILL",
  "CAP_NET_BIND_SERVICE",
  "CAP_SETFCAP",
  "CAP_SETGID",
  "CAP_SETPCAP",
  "CAP_SETUID",
  "CAP_SYS_CHROOT",
];

/** Where the host's node appears in an image sandbox (the relay and the harnesses run on it). */
export const NODE_INSIDE = "/opt/bridle/bin/node";

/** A host folder shown inside the sandbox. */
export interface Mount {
  source: string;
  target: string;
  writable?: boolean;
}

/** The one network path out of a sandbox: a TCP port on its loopback, relayed to the guard's socket. */
export interface GuardPath {
  /** The guard's Unix socket on the host. */
  socketPath: string;
  /** Port on the sandbox's own 127.0.0.1; the command sees `BRIDLE_GUARD_URL=http://127.0.0.1:<port>`. */
  port: number;
}

export interface RunOptions {
  timeoutMs: number;
  /** Memory for the whole run (every process and /tmp), in MiB. */
  memoryMb?: number;
  /** Processes and threads at once, for the whole run. */
  maxPids?: number;
  /** CPU cores' worth of time per second for the whole run; unlimited when absent. */
  cpus?: number;
  env?: Record<string, string>;
  mounts?: Mount[];
  guard?: GuardPath;
  /** Bytes of stdout and of stderr kept (the tail). */
  maxOutputBytes?: number;
  stdin?: string;
  /** Stops the run when aborted: every process of it is killed, as on a timeout. */
  signal?: AbortSignal;
  /**
   * Name the processes the command started and left running when it exited (a daemon, a server
   * in the background): they end with the run, so a later run of the sandbox never sees them.
   */
  reportLeftRunning?: boolean;
  /**
   * Who runs the command on an image: a name or uid of the image's `/etc/passwd`, as `docker exec
   * --user` (Harbor's `[agent] user`); root when absent. HOME, USER and LOGNAME are theirs unless
   * `env` sets them.
   */
  user?: string | number | undefined;
}

/** An account of an image's /etc/passwd. */
export interface Account {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

export interface RunResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  /** The run was stopped by its `signal`. */
  cancelled?: boolean;
  oomKilled: boolean;
  stdout: string;
  stderr: string;
  durationMs: number;
  /** With `reportLeftRunning`: the names of what the command left running (empty when nothing). */
  leftRunning?: string[];
}

export const defaultLimits = { memoryMb: 2048, maxPids: 256, maxOutputBytes: 64 * 1024 };

/**
 * A fresh workspace and the means to run commands on it under bubblewrap: the host system
 * read-only, only the workspace (and a private /tmp) writable, no network but the guard path,
 * memory and process limits, and every process killed when a run ends, timeouts included.
 */
export class Sandbox {
  private constructor(
    readonly id: string,
    /** The sandbox's private folder on the host. */
    readonly root: string,
    /** The workspace on the host; `workdir` inside. */
    readonly workspace: string,
    /** Where the workspace appears inside, and where commands start (WORKSPACE by default). */
    readonly workdir: string = WORKSPACE,
    /** The image whose root filesystem is the system, when the task has one. */
    readonly image?: SandboxImage,
    /** Lets go of the lease on the image (see lease.ts). */
    private readonly release: () => Promise<void> = async () => undefined,
    /** The network namespace its runs share with other sandboxes (a task's services); else its own. */
    private network?: SharedNetwork,
  ) {}

  /**
   * Moves its later runs to another shared network with the same names (the task's services
   * started afresh, as the verifier starts them for the tests); a sandbox of its own network stays so.
   */
  joinNetwork(network: SharedNetwork): void {
    if (!this.network || network.names.join(" ") !== this.network.names.join(" "))
      throw new SandboxSetupError("only a sandbox on a shared network can move to one with the same names");
    this.network = network;
  }

  /** The writable layer over an image sandbox's system: what its runs changed outside the workspace. */
  get changes(): string | undefined {
    return this.image ? join(this.root, "changes") : undefined;
  }

  /**
   * Cleans up after owners that died mid-run (a runner or verifier killed by SIGKILL): their bwrap
   * died with them (--die-with-parent, and its pid namespace with it), but their cgroups and folders
   * are left. Every process still in such a group is killed, the groups and the folders under
   * `baseDir` removed. Call it once when a service that owns sandboxes starts; what it reaped is
   * logged as a warning on `log`.
   */
  static async reapOrphans(
    baseDir: string,
    log?: { warn: (found: Orphans, message: string) => void },
  ): Promise<Orphans> {
    const groups = await Cgroup.reapOrphans();
    const folders: string[] = [];
    const entries = await readdir(baseDir).catch(() => [] as string[]);
    for (const name of entries) {
      const owner = new RegExp(`^${SANDBOX_PREFIX}(\\d+)-`).exec(name)?.[1];
      if (!owner || Number(owner) === process.pid || processAlive(Number(owner))) continue;
      await rm(join(baseDir, name), { recursive: true, force: true, maxRetries: 3 });
      folders.push(name);
    }
    if (groups.length + folders.length > 0)
      log?.warn({ groups, folders }, "reaped the sandboxes of an owner killed mid-run");
    return { groups, folders };
  }

  /**
   * A new sandbox whose workspace is a copy of `environmentDir`, or what `environmentArchive`
   * unpacks to (another sandbox's workspace, packed: `packFolder`), or empty; seen inside at
   * `workdir` (WORKSPACE by default; see workdirProblem for what it may be). On an image,
   * `changesArchive` is another sandbox's `changes`, packed: unpacked under this sandbox's root and
   * laid over the image below its own changes.
   */
  static async create(
    options: {
      environmentDir?: string;
      environmentArchive?: Readable;
      baseDir?: string;
      workdir?: string | undefined;
      image?: SandboxImage | undefined;
      changesArchive?: Readable;
      /** A network its runs share with other sandboxes, whose names resolve to its loopback. */
      network?: SharedNetwork | undefined;
    } = {},
  ): Promise<Sandbox> {
    if (options.changesArchive && !options.image)
      throw new SandboxSetupError("changes of another sandbox need an image to lie over");
    const workdir = options.workdir ?? WORKSPACE;
    const problem = workdirProblem(workdir);
    if (problem) throw new Error(problem);
    for (const dir of options.image ? [options.image.rootfs, ...(options.image.layers ?? [])] : []) {
      // Overlay options are comma- and colon-separated: such a path cannot be named in them.
      if (/[,:\\]/.test(dir) || !dir.startsWith("/"))
        throw new SandboxSetupError(`image layer ${dir}: not an absolute path free of ',', ':' and '\\'`);
    }
    const base = options.baseDir ?? tmpdir();
    await mkdir(base, { recursive: true });
    // The owner's pid leads the name, so a sandbox whose owner was killed is found (reapOrphans).
    const root = await mkdtemp(join(base, `${SANDBOX_PREFIX}${process.pid}-`));
    const workspace = join(root, "workspace");
    let image = options.image;
    // An image of the cache is leased while the sandbox lives, so its bound never removes it.
    const imageDir = image ? dirname(image.rootfs) : undefined;
    const release =
      imageDir && existsSync(join(imageDir, "image.json"))
        ? await takeLease(join(imageDir, LEASES))
        : undefined;
    try {
      if (options.environmentArchive) {
        await mkdir(workspace);
        await unpackFolder(options.environmentArchive, workspace);
      } else if (options.environmentDir) {
        // Timestamps are kept: the copy is the same workspace to whatever runs in it (make, tests
        // that compare modification times, a verifier judging what an agent changed and when).
        await cp(resolve(options.environmentDir), workspace, {
          recursive: true,
          verbatimSymlinks: true,
          preserveTimestamps: true,
        });
        // An image's files keep their owners, as in a container (a folder the Dockerfile gave to
        // the user the agent runs as stays theirs); cp makes everything the copier's.
        if (image) await copyOwners(resolve(options.environmentDir), workspace);
      } else {
        await mkdir(workspace);
      }
      await chmod(workspace, 0o755);
      if (image) for (const dir of ["changes", "overlay-work", "system"]) await mkdir(join(root, dir));
      if (image || options.network) {
        const names = options.network?.hostsLines() ?? [];
        await writeFile(join(root, "hosts"), `${IMAGE_HOSTS}${names.map((line) => `${line}\n`).join("")}`);
      }
      if (image && options.changesArchive) {
        const received = join(root, "received-changes");
        await mkdir(received);
        await unpackFolder(options.changesArchive, received);
        image = { ...image, layers: [received, ...(image.layers ?? [])] };
      }
    } catch (err) {
      await rm(root, { recursive: true, force: true });
      await release?.();
      throw err;
    }
    return new Sandbox(
      `${process.pid}-${randomBytes(6).toString("hex")}`,
      root,
      workspace,
      workdir,
      image,
      release,
      options.network,
    );
  }

  /** A private folder under the sandbox's root (tests, logs), created fresh. */
  async scratch(name: string): Promise<string> {
    const dir = join(this.root, name);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    return dir;
  }

  /**
   * The image's account for `user` (a name or uid of its /etc/passwd, as built: nothing a run
   * writes changes who a user is); undefined for root. A user needs an image that has it, and the
   * image's `setpriv` (util-linux) to become it.
   */
  account(user: string | number | undefined): Promise<Account | undefined> {
    if (user === undefined || user === 0 || user === "root" || user === "0")
      return Promise.resolve(undefined);
    // Read once per user: the image's /etc/passwd does not change under a sandbox.
    let found = this.accounts.get(String(user));
    if (!found) {
      found = this.readAccount(user);
      this.accounts.set(String(user), found);
    }
    return found;
  }

  private readonly accounts = new Map<string, Promise<Account | undefined>>();

  private async readAccount(user: string | number): Promise<Account | undefined> {
    if (!this.image)
      throw new SandboxSetupError(
        `user ${user}: a user other than root needs the task's own system (environment/Dockerfile)`,
      );
    const passwd = await readFile(join(this.image.rootfs, "etc", "passwd"), "utf8").catch(() => "");
    const found = passwd
      .split("\n")
      .map((line) => line.split(":"))
      .find(([name, , uid]) => name === String(user) || uid === String(user));
    if (!found) throw new SandboxSetupError(`user ${user}: not in the image's /etc/passwd`);
    const [name = "", , uid = "", gid = "", , home = "/"] = found;
    if (!["usr/bin/setpriv", "bin/setpriv"].some((p) => existsSync(join(this.image!.rootfs, p))))
      throw new SandboxSetupError(`user ${user}: the image has no setpriv (util-linux) to run as them`);
    return { name, uid: Number(uid), gid: Number(gid), home: home || "/" };
  }

  /** Runs `argv` inside the sandbox and returns once every process of the run is gone. */
  async run(argv: string[], options: RunOptions): Promise<RunResult> {
    if (argv.length === 0) throw new Error("sandbox run: empty command");
    const account = await this.account(options.user);
    if (account) {
      // Root's helpers (the relay, the entrypoint, the report of what was left running) stay root;
      // the command alone becomes the user, its capabilities gone with root.
      argv = ["setpriv", `--reuid=${account.uid}`, `--regid=${account.gid}`, "--init-groups", "--", ...argv];
      options = {
        ...options,
        env: { HOME: account.home, USER: account.name, LOGNAME: account.name, ...options.env },
      };
    }
    if (options.signal?.aborted) {
      const nothing = { exitCode: null, signal: null, timedOut: false, oomKilled: false };
      return { ...nothing, cancelled: true, stdout: "", stderr: "", durationMs: 0 };
    }
    const started = performance.now();
    const cgroup = await Cgroup.create(`${this.id}-${randomBytes(4).toString("hex")}`, {
      memoryMb: options.memoryMb ?? defaultLimits.memoryMb,
      maxPids: options.maxPids ?? defaultLimits.maxPids,
      cpus: options.cpus,
    });
    const leftRunning = options.reportLeftRunning
      ? join(this.root, `left-running-${randomBytes(4).toString("hex")}`)
      : undefined;
    try {
      if (leftRunning) await writeFile(leftRunning, "");
      const watched = leftRunning ? ["/bin/sh", "-c", LEFT_RUNNING, "sh", ...argv] : argv;
      // Beside the image's ENTRYPOINT, once it is up (see above).
      const command = this.image?.entrypoint?.length
        ? ["/bin/sh", "-c", besideEntrypoint(this.image.entrypoint), "sh", ...watched]
        : watched;
      const inner = options.guard
        ? [
            this.image ? NODE_INSIDE : "node",
            RELAY_SCRIPT,
            String(options.guard.port),
            GUARD_SOCKET,
            "--",
            ...command,
          ]
        : command;
      // A tiny shell joins the cgroups before exec'ing bwrap, so nothing inside escapes the limits.
      const enter = cgroup
        .procsFiles()
        .map((file) => `echo $$ > '${file}'`)
        .join(" && ");
      const script = `${enter ? `${enter} && ` : ""}exec "$@"`;
      const child = spawn(
        "/bin/sh",
        [
          "-c",
          script,
          "sh",
          ...this.overlayPrefix(),
          ...(this.network ? ["nsenter", `--net=${this.network.path}`, "--"] : []),
          "bwrap",
          ...this.bwrapArgs(options, leftRunning),
          "--",
          ...inner,
        ],
        {
          detached: true,
          stdio: [options.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
          // Only the stack's mark (see @bridle/service-kit's STACK_MARK) reaches bwrap itself, so a
          // sandbox that outlives its runner is found; what runs inside starts from --clearenv.
          env: process.env.BRIDLE_STACK_ID ? { BRIDLE_STACK_ID: process.env.BRIDLE_STACK_ID } : {},
        },
      );
      const limit = options.maxOutputBytes ?? defaultLimits.maxOutputBytes;
      const stdout = new TailBuffer(limit);
      const stderr = new TailBuffer(limit);
      child.stdout?.on("data", (chunk: Buffer) => stdout.push(chunk));
      child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk));
      // A command that exits without reading its input must not crash us with EPIPE.
      child.stdin?.on("error", () => undefined);
      if (options.stdin !== undefined) child.stdin?.end(options.stdin);

      let timedOut = false;
      let cancelled = false;
      const stop = () => {
        killGroup(child.pid);
        // Also through the cgroup, in case something inside holds our pipes open.
        void cgroup.killAll();
      };
      const timer = setTimeout(() => {
        timedOut = true;
        stop();
      }, options.timeoutMs);
      const onAbort = () => {
        cancelled = true;
        stop();
      };
      if (options.signal?.aborted) onAbort();
      else options.signal?.addEventListener("abort", onAbort, { once: true });
      const exit = await new Promise<{ code: number | null; signal: string | null }>((done, fail) => {
        child.on("error", fail);
        child.on("close", (code, signal) => done({ code, signal }));
      }).finally(() => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
      });
      const survivors = await cgroup.killAll();
      if (survivors.length > 0)
        throw new Error(`sandbox run: processes ${survivors.join(", ")} would not die`);
      return {
        exitCode: exit.code,
        signal: exit.signal,
        timedOut,
        ...(cancelled ? { cancelled } : {}),
        oomKilled: await cgroup.oomKilled(),
        stdout: stdout.toString(),
        stderr: stderr.toString(),
        durationMs: performance.now() - started,
        ...(leftRunning ? { leftRunning: await namesIn(leftRunning) } : {}),
      };
    } finally {
      await cgroup.killAll();
      await cgroup.dispose();
      if (leftRunning) await rm(leftRunning, { force: true });
    }
  }

  /** Writes a file into the workspace (relative path), creating folders. */
  async writeWorkspaceFile(path: string, content: string | Buffer, mode = 0o644): Promise<void> {
    const target = resolve(this.workspace, path);
    if (!target.startsWith(`${this.workspace}/`)) throw new Error(`path escapes the workspace: ${path}`);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, content, { mode });
  }

  /** Deletes the sandbox's folders. Runs have already killed their processes. */
  async dispose(): Promise<void> {
    await rm(this.root, { recursive: true, force: true, maxRetries: 3 });
    await this.release();
  }

  /**
   * For an image sandbox: a private mount namespace in which the image (under any layers) and the
   * sandbox's own writable layer are mounted as one overlay, which bwrap then shows as the root.
   * The mount dies with the namespace, so nothing is left mounted on the host.
   */
  private overlayPrefix(): string[] {
    if (!this.image) return [];
    const lower = [...(this.image.layers ?? []), this.image.rootfs].join(":");
    const mount =
      'mount -t overlay bridle -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4" && shift 4 && exec "$@"';
    return [
      "unshare",
      "--mount",
      "--propagation",
      "private",
      "/bin/sh",
      "-c",
      mount,
      "sh",
      lower,
      join(this.root, "changes"),
      join(this.root, "overlay-work"),
      join(this.root, "system"),
    ];
  }

  private bwrapArgs(options: RunOptions, leftRunning?: string): string[] {
    const image = this.image;
    const path = image?.env?.PATH ?? SANDBOX_PATH;
    const env: Record<string, string> = {
      PATH: image ? `${path}:${posix.dirname(NODE_INSIDE)}` : SANDBOX_PATH,
      HOME: "/tmp",
      LANG: "C.UTF-8",
      TERM: "dumb",
      TMPDIR: "/tmp",
      // Only uid 0 is mapped inside: tar run as root would try to restore an archive's owners
      // and fail on every file, so it extracts as owned by the caller, as a non-root user's does.
      TAR_OPTIONS: "--no-same-owner",
      // No registry is reachable from a sandbox: npm installs from its cache (an image's, see
      // @bridle/harbor's withNpmPackages) or fails at once, instead of retrying for minutes.
      npm_config_offline: "true",
      ...(image ? withoutPath(image.env ?? {}) : {}),
      ...(options.guard ? { BRIDLE_GUARD_URL: `http://127.0.0.1:${options.guard.port}` } : {}),
      ...options.env,
    };
    const args = [
      "--die-with-parent",
      "--new-session",
      // On an image, root is the image's root as in a rootful container: every user and group the
      // image has exists (useradd, files owned by `shadow`), which a user namespace mapping only
      // root cannot give. Its own process, network, IPC and host-name namespaces all the same.
      // On a shared network, every namespace but the network's (joined with nsenter, see run).
      ...(image
        ? [
            "--unshare-pid",
            ...(this.network ? [] : ["--unshare-net"]),
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
          ]
        : this.network
          ? ["--unshare-user-try", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
          : ["--unshare-all"]),
      "--cap-drop",
      "ALL",
      // On an image, root keeps a container's default capabilities (installing packages, serving
      // on port 80), inside the sandbox's own user, network and mount namespaces.
      ...(image ? CONTAINER_CAPABILITIES.flatMap((cap) => ["--cap-add", cap]) : []),
      "--clearenv",
      "--hostname",
      "sandbox",
      // The image's system (writable through the sandbox's own layer), else the host's, read-only.
      ...(image
        ? [
            "--bind",
            join(this.root, "system"),
            "/",
            // bwrap would make the folders that mount points need 0700, closed to users other than
            // root: made here first, as an engine makes them, open to all.
            ...mountParents([
              NODE_INSIDE,
              this.workdir,
              ...(options.mounts ?? []).map((m) => m.target),
              ...(options.guard ? [RELAY_SCRIPT, GUARD_SOCKET] : []),
              ...(leftRunning ? [LEFT_RUNNING_FILE] : []),
            ]).flatMap((dir) => ["--perms", "0755", "--dir", dir]),
            "--ro-bind",
            process.execPath,
            NODE_INSIDE,
          ]
        : systemMountArgs()),
      // An image's own /etc/hosts is not what runs on it: an engine writes one into each
      // container (the engine leaves the image an empty one, and with that localhost resolves
      // nowhere). Writable, as the engine's is, for this sandbox alone.
      // On a shared network, its services' names resolve to the shared loopback.
      ...(image || this.network ? ["--bind", join(this.root, "hosts"), "/etc/hosts"] : []),
      "--proc",
      "/proc",
      "--dev",
      "/dev",
      // World-writable and sticky, as a container's, so a user other than root has one too.
      "--perms",
      "01777",
      "--tmpfs",
      "/tmp",
      "--bind",
      this.workspace,
      this.workdir,
    ];
    for (const mount of options.mounts ?? []) {
      const inside = (a: string, b: string) => a === b || a.startsWith(`${b}/`);
      // A mount point inside the workspace would be made in the workspace's folder on the host.
      if (inside(mount.target, this.workdir) || inside(this.workdir, mount.target))
        throw new SandboxSetupError(`the mount at ${mount.target} and the workdir ${this.workdir} overlap`);
      args.push(mount.writable ? "--bind" : "--ro-bind", mount.source, mount.target);
    }
    if (options.guard) {
      args.push("--ro-bind", relayOnHost, RELAY_SCRIPT, "--bind", options.guard.socketPath, GUARD_SOCKET);
    }
    if (leftRunning) args.push("--bind", leftRunning, LEFT_RUNNING_FILE);
    // The root itself (a tmpfs holding the mount points) becomes read-only; the binds keep theirs.
    // An image's root stays writable, as a container's is: writes land in the sandbox's layer.
    if (!image) args.push("--remount-ro", "/");
    args.push("--chdir", this.workdir);
    for (const [key, value] of Object.entries(env)) args.push("--setenv", key, value);
    return args;
  }
}

/**
 * The distinct process names a LEFT_RUNNING report holds, sorted: at most 20, from its first 16 KiB,
 * printable names only (what runs inside can write the file too); none when it was not written.
 */
async function namesIn(file: string): Promise<string[]> {
  const handle = await open(file, "r").catch(() => null);
  if (!handle) return [];
  try {
    const buffer = Buffer.alloc(16 * 1024);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    const names = buffer.toString("utf8", 0, bytesRead).split("\n");
    return [...new Set(names.filter((name) => /^[\x21-\x7e][\x20-\x7e]{0,63}$/.test(name)))]
      .sort()
      .slice(0, 20);
  } finally {
    await handle.close();
  }
}

function withoutPath(env: Record<string, string>): Record<string, string> {
  const { PATH: _path, ...rest } = env;
  return rest;
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

/** Gives each file under `target` the owner of the file at the same path under `source`. */
async function copyOwners(source: string, target: string): Promise<void> {
  const from = await lstat(source);
  const to = await lstat(target);
  if (from.uid !== to.uid || from.gid !== to.gid) await lchown(target, from.uid, from.gid);
  if (!from.isDirectory()) return;
  for (const name of await readdir(source)) await copyOwners(join(source, name), join(target, name));
}

/** The folders above each of `targets`, outermost first, each once ("/" left out). */
function mountParents(targets: string[]): string[] {
  const dirs = new Set<string>();
  for (const target of targets) {
    const parts = posix.dirname(target).split("/").filter(Boolean);
    for (let i = 1; i <= parts.length; i++) dirs.add(`/${parts.slice(0, i).join("/")}`);
  }
  return [...dirs];
}
