import { type ChildProcess, spawn } from "node:child_process";
import { readFile, readlink } from "node:fs/promises";
import type { Readable } from "node:stream";

/**
 * A network namespace that several sandboxes share, as a compose project's containers share a
 * network: a task's own container and its services (a web server, an MCP server) reach each other
 * by service name on one loopback, and nothing else. No interface leads out of it; the guard stays
 * the agent's only way out (through the relay on that loopback).
 *
 * A holder process keeps the namespace alive: bwrap with `--unshare-net` (which brings its
 * loopback up) running `sleep`, and dying with this process (`--die-with-parent`), so a killed
 * owner leaves no namespace behind. Sandboxes join it with `nsenter --net`.
 */
export class SharedNetwork {
  private constructor(
    /** The namespace's file: `/proc/<holder>/ns/net`. */
    readonly path: string,
    /** The names that resolve to the shared loopback in every sandbox on it (the services'). */
    readonly names: readonly string[],
    private readonly holderPid: number,
    private readonly holder: ChildProcess,
  ) {}

  /** A new namespace whose sandboxes resolve each of `names` to 127.0.0.1. */
  static async create(names: readonly string[]): Promise<SharedNetwork> {
    for (const name of names) {
      if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(name))
        throw new Error(`network name ${JSON.stringify(name)}: not a host name (letters, digits, _.-)`);
    }
    const holder = spawn(
      "bwrap",
      [
        "--unshare-net",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--info-fd",
        "3",
        "--",
        "sleep",
        "infinity",
      ],
      { stdio: ["ignore", "ignore", "pipe", "pipe"], env: {} },
    );
    const stderr: Buffer[] = [];
    holder.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk));
    let child: number | undefined;
    const info = await readInfo(holder.stdio[3] as Readable)
      .then(async (pid) => {
        child = pid;
        // Ready once its command runs: killed before, bwrap's child is left waiting on it.
        for (let i = 0; i < 500; i++) {
          if ((await readlink(`/proc/${pid}/exe`).catch(() => "")).endsWith("/sleep")) return pid;
          await new Promise((r) => setTimeout(r, 10));
        }
        throw new Error("its holder did not start within 5 s");
      })
      .catch((err: Error) => err);
    if (info instanceof Error || !holder.pid) {
      holder.kill("SIGKILL");
      if (child) {
        try {
          process.kill(child, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
      const why = Buffer.concat(stderr).toString("utf8").trim() || (info as Error).message;
      throw new Error(`could not make a shared network (bwrap --unshare-net): ${why}`);
    }
    return new SharedNetwork(`/proc/${info}/ns/net`, [...names], info, holder);
  }

  /** The lines of /etc/hosts that name the shared loopback. */
  hostsLines(): string[] {
    return this.names.length > 0 ? [`127.0.0.1\t${this.names.join(" ")}`] : [];
  }

  /** TCP sockets listening in the namespace now (what its services serve). */
  async listeners(): Promise<number> {
    let count = 0;
    for (const file of ["tcp", "tcp6"]) {
      const text = await readFile(`/proc/${this.holderPid}/net/${file}`, "utf8").catch(() => "");
      // The fourth field is the socket's state; 0A is LISTEN.
      for (const line of text.split("\n").slice(1)) if (line.trim().split(/\s+/)[3] === "0A") count++;
    }
    return count;
  }

  /** Ends the namespace (the sandboxes on it have ended their runs). */
  async dispose(): Promise<void> {
    try {
      process.kill(this.holderPid, "SIGKILL");
    } catch {
      // Already gone.
    }
    if (this.holder.exitCode !== null || this.holder.signalCode !== null) return;
    const gone = new Promise<void>((done) => this.holder.once("exit", () => done()));
    this.holder.kill("SIGKILL");
    await gone;
  }
}

/** The holder's pid in this process's pid namespace, from bwrap's `--info-fd` JSON. */
function readInfo(stream: Readable): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = "";
    const timer = setTimeout(() => reject(new Error("bwrap gave no child pid within 10 s")), 10_000);
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      text += chunk;
      const pid = /"child-pid"\s*:\s*(\d+)/.exec(text)?.[1];
      if (pid) {
        clearTimeout(timer);
        // Read to its end, never closed early: bwrap dies of SIGPIPE on a closed info fd.
        stream.removeAllListeners("end");
        stream.resume();
        resolve(Number(pid));
      }
    });
    stream.on("end", () => {
      clearTimeout(timer);
      reject(new Error("bwrap ended before it gave its child's pid"));
    });
  });
}
