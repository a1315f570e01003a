import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Sandbox } from "./index.ts";

// Real HTTP servers on the host: one on a Unix socket (where the guard listens), one on TCP.
const HOST_TCP_PORT = 19411;
const GUARD_PORT = 19480; // inside the sandbox's own network namespace
let dir: string;
let socketPath: string;
let guard: Server;
let other: Server;
let sandbox: Sandbox;

const listen = (server: Server, target: string | number) =>
  new Promise<void>((done) =>
    typeof target === "string" ? server.listen(target, done) : server.listen(target, "127.0.0.1", done),
  );

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-relay-"));
  socketPath = join(dir, "guard.sock");
  guard = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => res.end(`guard saw ${req.method} ${req.url} ${body}`));
  });
  other = createServer((_req, res) => res.end("HOST-TCP-REACHED"));
  await listen(guard, socketPath);
  await listen(other, HOST_TCP_PORT);
  sandbox = await Sandbox.create({ baseDir: dir });
});
afterAll(async () => {
  await sandbox.dispose();
  await new Promise((done) => guard.close(done));
  await new Promise((done) => other.close(done));
  await rm(dir, { recursive: true, force: true });
});

const probe = `
import os, socket, urllib.request
url = os.environ["BRIDLE_GUARD_URL"]
print(urllib.request.urlopen(url + "/v1/chat", data=b"hello", timeout=5).read().decode())
for port in (${HOST_TCP_PORT}, 80, 8700):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2)
        print("REACHED", port)
    except OSError as e:
        print("blocked", port, type(e).__name__)
print("interfaces", sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))
`;

describe("the guard path", () => {
  it("reaches the guard's HTTP server through the relay, and nothing else", async () => {
    const r = await sandbox.run(["python3", "-c", probe], {
      timeoutMs: 20_000,
      guard: { socketPath, port: GUARD_PORT },
    });
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("guard saw POST /v1/chat hello");
    expect(r.stdout).not.toContain("REACHED");
    expect(r.stdout).toContain(`blocked ${HOST_TCP_PORT} ConnectionRefusedError`);
    expect(r.stdout).toContain("interfaces ['lo']");
    expect(r.exitCode).toBe(0);
  });

  it("without a guard path there is no way out at all", async () => {
    const r = await sandbox.run(
      ["bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/${HOST_TCP_PORT} && echo REACHED; ls /run/bridle 2>&1`],
      { timeoutMs: 10_000 },
    );
    expect(r.stdout).not.toContain("REACHED");
    expect(r.stdout).toMatch(/No such file or directory/);
  });

  it("passes the command's exit status through the relay", async () => {
    const r = await sandbox.run(["bash", "-c", "exit 7"], {
      timeoutMs: 10_000,
      guard: { socketPath, port: GUARD_PORT },
    });
    expect(r.exitCode).toBe(7);
  });
});
