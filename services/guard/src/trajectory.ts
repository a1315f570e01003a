import type { CaptureRecord, Session, Trajectory } from "@bridle/contracts";

/**
 * Stitches a session's calls into branches. A call continues an earlier one when its prompt starts
 * with that call's prompt plus completion, token for token; failing that (no token ids, or a
 * harness that re-serialises the model's tool-call arguments so the tokens differ), when its
 * messages start with the earlier call's messages. The branch holding the last call answered in
 * full is the trajectory; the others were abandoned (a retry, a blocked call's notice, a harness
 * sub-agent, a call the model server refused).
 */
export function stitch(session: Session, records: CaptureRecord[]): Trajectory {
  const ordered = [...records].sort((a, b) => a.seq - b.seq);
  const parent = new Map<number, number>();
  let byTokens = 0;
  let byMessages = 0;
  ordered.forEach((record, i) => {
    for (let j = i - 1; j >= 0; j--) {
      const earlier = ordered[j]!;
      const tokens = extendsByTokens(earlier, record);
      const messages = tokens ? false : extendsByMessages(earlier, record);
      if (tokens || messages) {
        parent.set(record.seq, earlier.seq);
        if (tokens) byTokens++;
        else byMessages++;
        break;
      }
    }
  });
  const chain = (seq: number): number[] => {
    const path = [seq];
    for (let p = parent.get(seq); p !== undefined; p = parent.get(p)) path.unshift(p);
    return path;
  };
  // The trajectory ends at the last call that was answered in full: a call the model server refused
  // or cut off after it (the harness then gave up) is not where the rollout's work is.
  const last = ordered.findLast((r) => r.error === null) ?? ordered.at(-1);
  const main = last ? chain(last.seq) : [];
  const onMain = new Set(main);
  const parents = new Set(parent.values());
  const abandoned = ordered
    .filter((r) => !onMain.has(r.seq) && !parents.has(r.seq))
    .map((leaf) => chain(leaf.seq).filter((s) => !onMain.has(s)));
  const bySeq = new Map(ordered.map((r) => [r.seq, r]));
  const toolCalls = main.reduce(
    (n, s) => n + (bySeq.get(s)?.toolCalls.filter((c) => c.released).length ?? 0),
    0,
  );
  const blocked = ordered.reduce((n, r) => n + r.toolCalls.filter((c) => c.decision === "block").length, 0);
  return {
    sessionId: session.id,
    calls: ordered.length,
    mainBranch: main,
    abandoned,
    stitchedBy: byTokens > 0 && byMessages > 0 ? "mixed" : byMessages > 0 ? "messages" : "token-ids",
    stitches: {
      "token-ids": byTokens,
      messages: byMessages,
      "new-branch": ordered.length - byTokens - byMessages,
    },
    toolCalls,
    blocked,
    rewardZero: session.mode === "block" && blocked > 0,
    records: ordered,
  };
}

/** True/false when both calls have token ids; undefined when they cannot be compared that way. */
function extendsByTokens(earlier: CaptureRecord, later: CaptureRecord): boolean | undefined {
  const prompt = earlier.promptTokenIds;
  const completion = earlier.completionTokenIds;
  const next = later.promptTokenIds;
  if (!prompt || !completion || !next || prompt.length === 0) return undefined;
  const prefix = prompt.length + completion.length;
  if (next.length <= prefix) return false;
  for (let i = 0; i < prompt.length; i++) if (next[i] !== prompt[i]) return false;
  for (let i = 0; i < completion.length; i++) if (next[prompt.length + i] !== completion[i]) return false;
  return true;
}

/**
 * True when the later call's messages are the earlier call's messages followed by the earlier
 * call's own answer (the same tool calls, or the same text): a retry of the earlier request, which
 * repeats only its messages, is a sibling and not a continuation.
 */
function extendsByMessages(earlier: CaptureRecord, later: CaptureRecord): boolean {
  const a = messagesOf(earlier.request);
  const b = messagesOf(later.request);
  if (!a || !b || b.length <= a.length) return false;
  if (!a.every((m, i) => JSON.stringify(m) === JSON.stringify(b[i]))) return false;
  return answeredBy(earlier, b[a.length]);
}

interface AnswerMessage {
  role?: string;
  content?: unknown;
  tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[];
}

function answeredBy(earlier: CaptureRecord, message: unknown): boolean {
  const answer = message as AnswerMessage | undefined;
  if (answer?.role !== "assistant") return false;
  const released = earlier.toolCalls.filter((c) => c.released);
  if (released.length > 0) {
    const sent = answer.tool_calls ?? [];
    return released.every((call) =>
      sent.some(
        (s) =>
          s.id === call.id ||
          (s.function?.name === call.name && sameJson(s.function?.arguments, call.arguments)),
      ),
    );
  }
  const text = typeof answer.content === "string" ? answer.content : JSON.stringify(answer.content ?? "");
  return (
    (earlier.response?.content ?? "").trim() === text.trim() ||
    text.includes((earlier.response?.content ?? "").trim())
  );
}

function sameJson(a: string | undefined, b: string): boolean {
  try {
    return JSON.stringify(JSON.parse(a ?? "")) === JSON.stringify(JSON.parse(b));
  } catch {
    return a === b;
  }
}

function messagesOf(request: unknown): unknown[] | undefined {
  const messages = (request as { messages?: unknown } | null)?.messages;
  return Array.isArray(messages) ? messages : undefined;
}
