import { randomBytes, randomUUID } from "node:crypto";
import {
  ErrorBody,
  type Session,
  SessionCreated,
  SessionRegistration,
  SessionView,
  Trajectory,
} from "@bridle/contracts";
import { createRouter, httpError, jsonBody } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";
import type { GuardStore } from "../capture.ts";
import { stitch } from "../trajectory.ts";

const errors = {
  400: { description: "Invalid request", content: { "application/json": { schema: ErrorBody } } },
  404: { description: "No such session", content: { "application/json": { schema: ErrorBody } } },
};
const IdParam = z.object({ id: z.string().min(1) });

/** Session registration and trajectories: `/admin/sessions`. */
export function adminRoutes(store: GuardStore) {
  const sessionOr404 = async (id: string) => {
    const session = await store.session(id);
    if (!session) throw httpError(404, "not_found", `No guard session ${id}`);
    return session;
  };
  return createRouter()
    .openapi(
      createRoute({
        method: "post",
        path: "/sessions",
        summary: "Register a session: the harness then sends its API key to the proxy",
        request: {
          body: jsonBody(SessionRegistration),
        },
        responses: {
          201: { description: "Registered", content: { "application/json": { schema: SessionCreated } } },
          409: {
            description: "API key already in use",
            content: { "application/json": { schema: ErrorBody } },
          },
          400: errors[400],
        },
      }),
      async (c) => {
        const input = c.req.valid("json");
        const apiKey = input.apiKey ?? `bridle-${randomBytes(18).toString("base64url")}`;
        const session = await store.register({ ...input, apiKey, id: randomUUID() });
        if (!session) throw httpError(409, "conflict", "A session with this API key already exists");
        c.get("log").info(
          { sessionId: session.id, adapter: session.adapter, mode: session.mode },
          "session registered",
        );
        return c.json({ id: session.id, apiKey }, 201);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/sessions/{id}",
        summary: "A session's settings and counts",
        request: { params: IdParam },
        responses: {
          200: { description: "Session", content: { "application/json": { schema: SessionView } } },
          404: errors[404],
        },
      }),
      async (c) => {
        const { apiKey: _key, ...session } = await sessionOr404(c.req.valid("param").id);
        return c.json({ ...session, ...(await store.counts(session.id)) }, 200);
      },
    )
    .openapi(
      createRoute({
        method: "get",
        path: "/sessions/{id}/trajectory",
        summary: "The session's calls stitched into a trajectory; also written to the data folder",
        description:
          "Read with the admin token, or without it by a holder of the session's read grant (`grant`): an HMAC of the session id under the admin token, which opens this trajectory and nothing else",
        request: {
          params: IdParam,
          query: z.object({
            grant: z.string().optional().describe("The session's read grant, in place of the admin token"),
          }),
        },
        responses: {
          200: { description: "Trajectory", content: { "application/json": { schema: Trajectory } } },
          404: errors[404],
        },
      }),
      async (c) => c.json(await trajectoryOf(await sessionOr404(c.req.valid("param").id)), 200),
    )
    .openapi(
      createRoute({
        method: "post",
        path: "/sessions/{id}/end",
        summary:
          "End a session once its harness is done: later model calls are refused, calls under way are recorded, and the final trajectory is returned",
        request: { params: IdParam },
        responses: {
          200: { description: "Final trajectory", content: { "application/json": { schema: Trajectory } } },
          404: errors[404],
        },
      }),
      async (c) => {
        const { id } = c.req.valid("param");
        const session = await store.end(id);
        if (!session) throw httpError(404, "not_found", `No guard session ${id}`);
        const trajectory = await trajectoryOf(session);
        c.get("log").info({ sessionId: id, calls: trajectory.calls }, "session ended");
        return c.json(trajectory, 200);
      },
    );

  async function trajectoryOf(session: Session) {
    const trajectory = stitch(session, await store.records(session.id));
    await store.writeTrajectory(session.id, trajectory);
    return trajectory;
  }
}
