import type { CaptureRecord, Session, Trajectory } from "@bridle/contracts";

/**
 * Stitches a session's calls into branches. A call continues an earlier one when its prompt starts
 * with that call's prompt plus completion, token for token; without token ids (capture off), when
 * its messages start with the earlier call's messages. The branch holding the last call is the
 * trajectory; the others were abandoned (a retry, a blocked call's notice, a harness sub-agent).
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
      const messages = tokens === undefined ? extendsByMessages(earlier, record) : false;
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
  const last = ordered.at(-1);
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

function extendsByMessages(earlier: CaptureRecord, later: CaptureRecord): boolean {
  const a = messagesOf(earlier.request);
  const b = messagesOf(later.request);
  if (!a || !b || b.length <= a.length) return false;
  return a.every((m, i) => JSON.stringify(m) === JSON.stringify(b[i]));
}

function messagesOf(request: unknown): unknown[] | undefined {
  const messages = (request as { messages?: unknown } | null)?.messages;
  return Array.isArray(messages) ? messages : undefined;
}
