/**
 * The floor under any Node proxy, for the benchmark: a byte pipe that forwards each request to the
 * upstream over the same kind of keep-alive pool the guard uses and pipes the answer back, reading
 * nothing. What the guard costs beyond this row is its own work: parsing events, holding and
 * judging tool calls, rewriting the answer, recording the call.
 *
 *   node --import tsx bench/passthrough.ts --port N --upstream http://127.0.0.1:M
 */
import { Agent, createServer, request } from "node:http";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: { port: { type: "string" }, upstream: { type: "string" } },
});
const upstream = new URL(values.upstream ?? "http://127.0.0.1:8000");
const agent = new Agent({ keepAlive: true, maxSockets: 1024, maxFreeSockets: 256 });

createServer((req, res) => {
  if (req.url === "/healthz") return void res.end("ok");
  const out = request(
    {
      host: upstream.hostname,
      port: upstream.port,
      path: req.url,
      method: req.method,
      agent,
      headers: { "content-type": "application/json", "content-length": req.headers["content-length"] ?? "0" },
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, { "content-type": answer.headers["content-type"] ?? "" });
      answer.pipe(res);
    },
  );
  out.on("error", () => res.destroy());
  req.pipe(out);
}).listen(Number(values.port), "127.0.0.1");
