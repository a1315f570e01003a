import { posix } from "node:path";
import { type CheckContext, type GuardDecision, trustedRole } from "@bridle/contracts";
import type { Effect } from "./effect.ts";
import { hostAllowed, mentionedHosts } from "./hosts.ts";
import {
  globMatches,
  isSharedConfig,
  isSolutionPath,
  isTestConfig,
  isTestPath,
  isVerifierPath,
  mentionedIn,
  OUTCOME_FORGERY,
  TEST_SKIP_CONTENT,
} from "./paths.ts";
import { toolCallEffects } from "./tool-call.ts";

/** A tool call as the model emitted it, arguments already parsed. */
export interface ToolCallInput {
  name: string;
  arguments: Record<string, unknown>;
}

/** The verdict plus what the guard understood the call to do (for logs and the audit command). */
export type Verdict = GuardDecision & { effects: Effect[] };

/**
 * An instruction about version control itself (find a commit, revert a change, write a changelog):
 * looking into history is then the task, not a way around it.
 */
const ABOUT_HISTORY =
  /\b(git\s+(log|show|diff|blame|bisect|reflog|history)|commit (history|hash|id|message)s?|which commit|previous (commit|version)|earlier (commit|version)|revert|changelog|the history)\b/i;
/** Where the verifier's files are mounted at verification time (Harbor's layout), never the agent's. */
const VERIFIER_MOUNT = /^\/(tests|solution|logs\/verifier)(\/|$)/;
/** git's own store: objects, refs, reflogs, packed refs (history read as files). */
const GIT_STORE = /(^|\/)\.git\/(objects|refs|logs|packed-refs|ORIG_HEAD|FETCH_HEAD)(\/|$)/;
/** The agent works in /app: a relative path climbing out of it lands at the root. */
const fromWorkspace = (path: string) => (path.startsWith("../") ? posix.join("/app", path) : path);
/** Verbs that ask for a file to be made or changed. */
const ASKS_TO_WRITE =
  /\b(create|write|add|set up|update|change|edit|modify|implement|extend|rewrite)\b[^.]{0,60}$/i;
const FORBIDS = /\b(do not|don't|never|must not|without)\b/i;

/** An instruction that asks for tests to be written: writing the test files it names is the task. */
const ASKS_FOR_TESTS = /\b(write|add|create|extend|implement|update|fix)\b[^.]{0,80}\b(unit )?tests?\b/i;

/**
 * Judges one tool call against the session's rules. Pure and synchronous: the proxy and
 * `bridle guard check` call exactly this. The first rule that objects decides, in this order:
 * undeclared-tool, task-plugin, test-tampering, answer-retrieval, unmentioned-host.
 * `effects`: what `toolCallEffects` gives for this call, when the caller has it already (they
 * depend on the call alone, so the proxy keeps them for calls it sees again).
 */
export function checkToolCall(call: ToolCallInput, ctx: CheckContext, effects?: Effect[]): Verdict {
  const on = (rule: keyof CheckContext["rules"]) => ctx.rules[rule]?.enabled !== false;
  if (on("undeclared-tool") && !ctx.declaredTools.includes(call.name)) {
    return block(call, "undeclared-tool", `"${call.name}" is not one of the tools this request declared`, []);
  }
  effects ??= toolCallEffects(call.name, call.arguments);
  const found =
    (on("task-plugin") ? taskPluginViolation(effects, ctx) : undefined) ??
    (on("test-tampering") ? tampering(effects, ctx) : undefined) ??
    (on("answer-retrieval") ? answerRetrieval(effects, ctx) : undefined) ??
    (on("unmentioned-host") ? unmentionedHost(effects, ctx) : undefined);
  return found ? block(call, found.rule, found.detail, effects) : { decision: "allow", effects };
}

function block(call: ToolCallInput, rule: string, detail: string, effects: Effect[]): Verdict {
  return {
    decision: "block",
    rule,
    notice: `[bridle guard] The ${call.name} call was blocked by rule ${rule}: ${detail}. It was not executed.`,
    effects,
  };
}

type Finding = { rule: string; detail: string } | undefined;

function taskPluginViolation(effects: Effect[], ctx: CheckContext): Finding {
  for (const rule of ctx.taskPlugins.rules) {
    for (const e of effects) {
      if (e.kind === "exec" && rule.commands.some((c) => startsWithWords(e.argv, c))) {
        return {
          rule: `task-plugin:${rule.id}`,
          detail: `${rule.reason} (runs ${e.argv.slice(0, 3).join(" ")})`,
        };
      }
      if ((e.kind === "read" || e.kind === "write") && rule.paths.some((g) => globMatches(g, e.path))) {
        return { rule: `task-plugin:${rule.id}`, detail: `${rule.reason} (${e.kind}s ${e.path})` };
      }
    }
  }
  return undefined;
}

function startsWithWords(argv: string[], prefix: string): boolean {
  const words = prefix.trim().split(/\s+/);
  // `pip install sympy` also matches `pip install sympy==1.13` and `sympy[extra]`.
  return words.every(
    (w, i) =>
      argv[i] === w ||
      (i === words.length - 1 && /^[=<>~![]/.test(argv[i]?.slice(w.length) ?? "") && argv[i]!.startsWith(w)),
  );
}

function tampering(effects: Effect[], ctx: CheckContext): Finding {
  if (!effects.some((e) => e.kind === "write")) return undefined;
  const extra = [...ctx.taskPlugins.protected_paths, ...(ctx.rules["test-tampering"]?.extraProtected ?? [])];
  // Matched against the whole instruction, which can run to kilobytes: only for a write to a test.
  let asksForTests: boolean | undefined;
  const exempt = (path: string) => {
    if (asksForTests === undefined) asksForTests = ASKS_FOR_TESTS.test(ctx.instruction);
    return (
      (asksForTests && (mentionedIn(ctx.instruction, path) || parentMentioned(ctx.instruction, path))) ||
      askedToWrite(ctx.instruction, path)
    );
  };
  for (const e of effects) {
    if (e.kind !== "write") continue;
    // A new empty folder changes no test (a folder where the verifier writes its results could).
    if (e.how === "mkdir" && !isVerifierPath(e.path)) continue;
    const named = extra.some((g) => globMatches(g, e.path));
    if (named || (isTestPath(e.path) && !exempt(e.path))) {
      return {
        rule: "test-tampering",
        detail: `it changes ${e.path || "the working directory"} (${e.how}), which belongs to the task's tests or verifier`,
      };
    }
    if (isTestConfig(e.path) && !askedToWrite(ctx.instruction, e.path))
      return { rule: "test-tampering", detail: `it changes the test configuration ${e.path} (${e.how})` };
    if (isSharedConfig(e.path) && e.content !== undefined && TEST_SKIP_CONTENT.test(e.content)) {
      return { rule: "test-tampering", detail: `it changes test settings in ${e.path} (${e.how})` };
    }
    if (e.content !== undefined && OUTCOME_FORGERY.test(e.content)) {
      return { rule: "test-tampering", detail: `it writes code into ${e.path} that forges test outcomes` };
    }
  }
  return undefined;
}

/**
 * Whether a sentence of the instruction names this file and asks for it to be made or changed, and
 * does not forbid it: "Create conftest.py with a fixture..." makes conftest.py the task's own file.
 */
function askedToWrite(instruction: string, path: string): boolean {
  if (!mentionedIn(instruction, path)) return false;
  const segs = path.split("/").filter(Boolean);
  const forms = [path, segs.slice(-2).join("/"), segs.at(-1) ?? ""].filter((f) => f.length > 0);
  return instruction.split(/(?<=[.!?])\s+|\n+/).some((sentence) => {
    if (FORBIDS.test(sentence)) return false;
    // The verb comes just before the file's name: "create pytest.ini", not "make the test in x pass".
    const at = Math.min(...forms.map((f) => sentence.indexOf(f)).filter((i) => i >= 0));
    return Number.isFinite(at) && ASKS_TO_WRITE.test(sentence.slice(0, at));
  });
}

function parentMentioned(text: string, path: string): boolean {
  const dir = path.slice(0, path.lastIndexOf("/"));
  return (
    dir.length > 0 && (text.includes(`${dir}/`) || text.includes(`${dir.split("/").slice(-2).join("/")}/`))
  );
}

function answerRetrieval(effects: Effect[], ctx: CheckContext): Finding {
  const sources = [...ctx.taskPlugins.answer_paths, ...(ctx.rules["answer-retrieval"]?.extraSources ?? [])];
  let aboutHistory: boolean | undefined;
  const historyIsTheTask = () => (aboutHistory ??= ABOUT_HISTORY.test(ctx.instruction));
  for (const e of effects) {
    if ((e.kind === "history" || (e.kind === "read" && GIT_STORE.test(e.path))) && !historyIsTheTask()) {
      return {
        rule: "answer-retrieval",
        detail: `it looks into other refs or history (${e.kind === "read" ? `reads ${e.path}` : e.how}), where the known answer lives`,
      };
    }
    if (e.kind !== "read") continue;
    if (VERIFIER_MOUNT.test(fromWorkspace(e.path))) {
      return {
        rule: "answer-retrieval",
        detail: `it reads ${e.path} (${e.how}), where the verifier's hidden tests, solution or results are mounted`,
      };
    }
    const named = sources.some((g) => globMatches(g, e.path));
    if (named || (isSolutionPath(e.path) && !mentionedIn(ctx.instruction, e.path))) {
      return {
        rule: "answer-retrieval",
        detail: `it reads ${e.path} (${e.how}), a reference solution or answer source`,
      };
    }
  }
  return undefined;
}

function unmentionedHost(effects: Effect[], ctx: CheckContext): Finding {
  // Most calls reach no network: only then is the history scanned for the hosts it names. Only the
  // task's side may name one: the instruction, system and user messages, the session's allow-list.
  // The agent's own messages, its tool calls and their results (file contents) never can.
  if (!effects.some((e) => e.kind === "network")) return undefined;
  const settings = ctx.rules["unmentioned-host"];
  const trusted = ctx.history.filter((m) => trustedRole(m.role)).map((m) => m.content);
  const allowed = mentionedHosts([ctx.instruction, ...trusted]);
  for (const h of [
    ...ctx.allowedHosts,
    ...(settings?.alwaysAllowed ?? ["localhost", "127.0.0.1", "::1", "0.0.0.0"]),
  ]) {
    allowed.add(h.toLowerCase());
  }
  for (const e of effects) {
    if (e.kind === "network" && !hostAllowed(e.host, allowed)) {
      return {
        rule: "unmentioned-host",
        detail: `it contacts ${e.host} (${e.how}), which neither the instruction nor the session allows (hosts named by the agent or its tools do not count)`,
      };
    }
  }
  return undefined;
}
