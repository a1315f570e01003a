// Runs inside a sandbox whose network namespace has only loopback: listens on 127.0.0.1:<port>,
// forwards every connection to the guard's Unix socket carried into the sandbox, then runs the
// command and exits with its status. Plain JavaScript: the sandbox has node, not tsx.
//   node relay.mjs <port> <socket> -- <command> [args...]
import { spawn } from "node:child_process";
import net from "node:net";
import { constants } from "node:os";

const [port, socketPath, separator, ...command] = process.argv.slice(2);
if (!port || !socketPath || separator !== "--" || command.length === 0) {
  process.stderr.write("usage: relay.mjs <port> <socket> -- <command> [args...]\n");
  process.exit(2);
}

const server = net.createServer((client) => {
  const upstream = net.connect(socketPath);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on("error", close);
  upstream.on("error", close);
  client.pipe(upstream).pipe(client);
});
server.on("error", (err) => {
  process.stderr.write(`relay: cannot listen on 127.0.0.1:${port}: ${err.message}\n`);
  process.exit(125);
});
server.listen(Number(port), "127.0.0.1", () => {
  const child = spawn(command[0], command.slice(1), { stdio: "inherit" });
  for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => child.kill(signal));
  child.on("error", (err) => {
    process.stderr.write(`relay: cannot start ${command[0]}: ${err.message}\n`);
    process.exit(127);
  });
  child.on("exit", (code, signal) => process.exit(code ?? 128 + (constants.signals[signal] ?? 0)));
});
