// What a session asks the person: approvals of tool calls (the broker's approve callback) and answers
// to input(). It remembers "allow for the session" while the session lives, and attaches the channels
// every question of the session may use (the viewer's) to each run that asks; one that reaches the person
// only later (a viewer page opened) is then offered what still waits.
import type { ApprovalQuestion } from "../broker/broker.ts";
import type { Verdict } from "../broker/journal.ts";
import { ReplError } from "../errors.ts";
import type { Channel, Outcome, Questions } from "../person/questions.ts";

const NO_ONE_TO_ASK =
  "input() needs the person to answer, and nobody can be asked: this client did not declare MCP elicitation " +
  "and no viewer page is open (repl-mcp --viewer). Pass the value in the code instead";
const SECRET_NO_ONE =
  "getpass() is answered only on the viewer page (an agent client may show and keep the text), and no viewer " +
  "page is open. Open it (repl-mcp --viewer) or read the secret from the environment or a file";

export class SessionAsking {
  /** Channels any question of this session may use, whichever run or call asks (the viewer's). */
  readonly shared = new Set<Channel>();
  private readonly allowed = new Set<string>();
  /** Hosts a contained cell may reach for the rest of the session. */
  private readonly hosts = new Set<string>();
  private readonly attached = new WeakMap<Questions, Set<Channel>>();
  /** The runs' (or calls') questions with an ask in flight, and how many asks each. */
  private readonly inFlight = new Map<Questions, number>();

  constructor(
    readonly sessionId: string,
    private readonly timeoutMs: number,
  ) {}

  /** The broker's approver for calls made by `questions`' run (or tool call). */
  approver(questions: Questions | undefined, runId: string | null, onWait?: (seconds: number) => void) {
    return async (question: ApprovalQuestion, signal?: AbortSignal): Promise<Verdict> => {
      const key = `${question.server}\u0000${question.tool}`;
      if (this.allowed.has(key)) return { decision: "allow_session", channel: "session" };
      if (!questions) return { decision: "cancelled", channel: null };
      const outcome = await this.ask(questions, question, runId, signal, onWait);
      if (!outcome.answered) return { decision: outcome.why, channel: null };
      const decision = "decision" in outcome.reply ? outcome.reply.decision : "deny";
      if (decision === "allow_session") this.allowed.add(key);
      return { decision, channel: outcome.channel };
    };
  }

  /**
   * A contained cell's connection to a host nobody allowed or denied: asked like an approval; "allow for
   * the session" allows that host (any port) until the session closes.
   */
  async connection(
    questions: Questions,
    runId: string | null,
    target: { host: string; port: number },
    signal?: AbortSignal,
  ): Promise<Verdict> {
    if (this.hosts.has(target.host)) return { decision: "allow_session", channel: "session" };
    const outcome = await this.ask(questions, { kind: "network", ...target }, runId, signal);
    if (!outcome.answered) return { decision: outcome.why, channel: null };
    const decision = "decision" in outcome.reply ? outcome.reply.decision : "deny";
    if (decision === "allow_session") this.hosts.add(target.host);
    return { decision, channel: outcome.channel };
  }

  /** input()/getpass(): the person's text, or a refusal the worker turns into EOFError. */
  async input(
    questions: Questions,
    runId: string,
    prompt: string,
    secret: boolean,
    signal: AbortSignal,
    onWait: (seconds: number) => void,
  ): Promise<string> {
    const outcome = await this.ask(questions, { kind: "input", prompt, secret }, runId, signal, onWait);
    if (outcome.answered && "value" in outcome.reply) return outcome.reply.value;
    const message = outcome.answered
      ? "The person declined to answer input()"
      : outcome.why === "no_channel"
        ? secret
          ? SECRET_NO_ONE
          : NO_ONE_TO_ASK
        : outcome.why === "timed_out"
          ? "Nobody answered input() in time (--approval-timeout-s)"
          : "input() was cancelled";
    throw new ReplError("INPUT_UNANSWERED", message);
  }

  /** A shared channel reaches the person now (a viewer page opened): it is offered every question waiting. */
  offerWaiting(channel: Channel): void {
    for (const questions of this.inFlight.keys()) questions.offerWaiting(channel);
  }

  private async ask(
    questions: Questions,
    question: Parameters<Questions["ask"]>[0],
    runId: string | null,
    signal: AbortSignal | undefined,
    onWait?: (seconds: number) => void,
  ): Promise<Outcome> {
    let channels = this.attached.get(questions);
    if (!channels) {
      channels = new Set();
      this.attached.set(questions, channels);
    }
    for (const channel of this.shared) {
      if (channels.has(channel)) continue;
      channels.add(channel);
      questions.attach(channel);
    }
    this.inFlight.set(questions, (this.inFlight.get(questions) ?? 0) + 1);
    try {
      return await questions.ask(question, {
        signal: signal ?? new AbortController().signal,
        timeoutMs: this.timeoutMs,
        where: { sessionId: this.sessionId, runId },
        onWait: onWait && (() => onWait(this.timeoutMs / 1000)),
      });
    } finally {
      const left = (this.inFlight.get(questions) ?? 1) - 1;
      if (left > 0) this.inFlight.set(questions, left);
      else this.inFlight.delete(questions);
    }
  }
}
