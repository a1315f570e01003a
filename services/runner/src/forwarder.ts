import { rm } from "node:fs/promises";
import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * A Unix socket on the host that forwards every connection to the guard's TCP port. The sandbox
 * gets this one socket and nothing else of the network, so each rollout has its own door to the
 * guard, closed when the rollout ends.
 */
export class GuardForwarder {
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;

  private constructor(
    readonly path: string,
    guard: { host: string; port: number },
  ) {
    this.server = createServer((inbound) => {
      const outbound = connect(guard.port, guard.host);
      for (const socket of [inbound, outbound]) {
        this.sockets.add(socket);
        socket.on("close", () => this.sockets.delete(socket));
        socket.on("error", () => {
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.pipe(outbound).pipe(inbound);
    });
  }

  static async open(path: string, guard: { host: string; port: number }): Promise<GuardForwarder> {
    await rm(path, { force: true });
    const forwarder = new GuardForwarder(path, guard);
    await new Promise<void>((resolve, reject) => {
      forwarder.server.once("error", reject);
      forwarder.server.listen(path, resolve);
    });
    return forwarder;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await rm(this.path, { force: true });
  }
}
