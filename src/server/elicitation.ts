// Asking the person through their agent client: a 2025-11-25 `elicitation/create` form sent during the
// tool call that is in flight (execute_python, a python_run poll, artifact_forward). Approvals are one
// required enum, `decision`; input() is one required string, `value`. A decline or cancel denies an
// approval and leaves input() unanswered. getpass() is never put here: a client may show and keep the text.
import * as v from "valibot";
import { INPUT_ANSWER_MAX_CHARS } from "../limits.ts";
import {
  type Asked,
  type Channel,
  DECISIONS,
  decides,
  type Question,
  type Reply,
} from "../person/questions.ts";

/** The elicitation form of the 2025-11-25 revision, as far as we send it. */
export interface ElicitForm {
  mode: "form";
  /** The related task, when the form is asked for one (2025-11-25 tasks/result). */
  _meta?: Record<string, unknown>;
  message: string;
  requestedSchema: {
    type: "object";
    properties: Record<
      string,
      { type: "string"; title: string; enum: string[] } | { type: "string"; title: string; maxLength: number }
    >;
    required: string[];
  };
}

/** The SDK's ctx.mcpReq.elicitInput, bound to one tool call. */
export type Elicit = (
  form: ElicitForm,
  options: { signal: AbortSignal; timeout: number },
) => Promise<{ action: string; content?: Record<string, unknown> }>;

/** An elicitation's result as a client sends it back (in a retry, or in tasks/update). */
export const ElicitResponse = v.object({ action: v.string(), content: v.optional(v.unknown()) });

const Answer = {
  approval: v.object({ decision: v.picklist(DECISIONS) }),
  input: v.object({ value: v.pipe(v.string(), v.maxLength(INPUT_ANSWER_MAX_CHARS)) }),
};

/** Whether a legacy client's declared capabilities include form elicitation. */
export function formsDeclared(capabilities: { elicitation?: Record<string, unknown> } | undefined): boolean {
  const elicitation = capabilities?.elicitation;
  if (!elicitation || typeof elicitation !== "object") return false;
  // An empty object is the 2025-06-18 spelling of "forms"; 2025-11-25 names each mode.
  return Object.keys(elicitation).length === 0 || "form" in elicitation;
}

const DECISION_FORM: ElicitForm["requestedSchema"] = {
  type: "object",
  properties: {
    decision: { type: "string", title: "Decision", enum: [...DECISIONS] },
  },
  required: ["decision"],
};

export function formFor(question: Question): ElicitForm {
  if (question.kind === "approval") {
    const about = question.summary ? ` (${question.summary})` : "";
    return {
      mode: "form",
      message:
        `A Python cell wants to call ${question.server}.${question.tool}${about} with these arguments:\n` +
        `${question.arguments}\nallow_once sends this call; allow_session also allows later calls of this ` +
        "tool in this session; deny sends nothing.",
      requestedSchema: DECISION_FORM,
    };
  }
  if (question.kind === "network") {
    return {
      mode: "form",
      message:
        `A contained Python cell wants to connect to ${question.host}:${question.port}, which the sandbox ` +
        "policy neither allows nor denies. allow_once lets this connection through; allow_session allows " +
        "this host for the rest of the session; deny refuses it.",
      requestedSchema: DECISION_FORM,
    };
  }
  return {
    mode: "form",
    message: question.prompt.trim() || "A Python cell is waiting for input()",
    requestedSchema: {
      type: "object",
      properties: { value: { type: "string", title: "Answer", maxLength: INPUT_ANSWER_MAX_CHARS } },
      required: ["value"],
    },
  };
}

/** What an elicitation's result says; anything but a well-formed accept is a refusal. */
export function replyFrom(question: Question, result: { action: string; content?: unknown }): Reply {
  if (decides(question)) {
    const parsed = v.safeParse(Answer.approval, result.content);
    return result.action === "accept" && parsed.success
      ? { decision: parsed.output.decision }
      : { decision: "deny" };
  }
  const parsed = v.safeParse(Answer.input, result.content);
  return result.action === "accept" && parsed.success ? { value: parsed.output.value } : { declined: true };
}

/** A channel that asks through one tool call's client, for as long as that call lasts. */
export function elicitationChannel(elicit: Elicit, timeoutMs: number): Channel {
  const asking = new Map<Asked, AbortController>();
  return {
    name: "elicitation",
    reaches: (question) => !(question.kind === "input" && question.secret),
    offer(asked, lost) {
      const controller = new AbortController();
      asking.set(asked, controller);
      elicit(formFor(asked.question), { signal: controller.signal, timeout: timeoutMs }).then(
        (result) => {
          asking.delete(asked);
          asked.answer("elicitation", replyFrom(asked.question, result));
        },
        () => {
          // Withdrawn, or the client could not answer: the question stays with the other channels.
          if (asking.delete(asked)) lost();
        },
      );
    },
    withdraw(asked) {
      const controller = asking.get(asked);
      asking.delete(asked);
      controller?.abort();
    },
  };
}

/**
 * A python_start run of a client that takes forms: its questions wait for the next python_run poll,
 * which attaches that call's own channel (see tools/runs.ts).
 */
export const NEXT_POLL: Channel = {
  name: "elicitation",
  standsIn: true,
  reaches: (question) => !(question.kind === "input" && question.secret),
  offer() {},
  withdraw() {},
};
