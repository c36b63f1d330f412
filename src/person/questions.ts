// What a run asks the person, and the channels that can reach them (docs/broker.md, "Approvals"). A question waits
// until the first channel answers it, the wait expires, or the run ends it (cancel, timeout); the other
// channels are then told to take it back. A question no channel can reach is not asked at all: the
// caller learns at once that nobody could answer, instead of waiting for an answer that cannot come.
import { QUESTIONS_PER_RUN_MAX } from "../limits.ts";

export const DECISIONS = ["allow_once", "allow_session", "deny"] as const;
export type Decision = (typeof DECISIONS)[number];

export type Question =
  | {
      kind: "approval";
      server: string;
      tool: string;
      /** The tool's title or the first line of its description. */
      summary: string;
      /** The arguments as bounded JSON, secrets of the registry replaced. */
      arguments: string;
    }
  | {
      kind: "input";
      prompt: string;
      /** getpass(): only a channel that neither shows nor keeps the answer may take it. */
      secret: boolean;
    }
  | {
      /** A contained cell's connection to a host the sandbox policy neither allows nor denies. */
      kind: "network";
      host: string;
      port: number;
    };

/** Questions the person answers with a decision (allow once, for the session, deny). */
export function decides(question: Question): boolean {
  return question.kind !== "input";
}

export type ChannelName = "elicitation" | "viewer";

/** An answer as a channel gives it: a decision for an approval, text (or a refusal) for input. */
export type Reply =
  | { decision: Decision }
  | { value: string }
  /** The person closed the question without answering (an elicitation's decline or cancel). */
  | { declined: true };

export type Outcome =
  | { answered: true; channel: ChannelName; reply: Reply }
  | { answered: false; why: "no_channel" | "timed_out" | "cancelled" };

export interface Channel {
  readonly name: ChannelName;
  /**
   * Keeps the questions for a later request of its client (the next python_run poll, a task's result)
   * rather than asking now: it never counts as the one carrying a question.
   */
  readonly standsIn?: boolean;
  /** Whether this channel can put the question to the person now. */
  reaches(question: Question): boolean;
  /** Asks; the channel answers through `asked.answer`, or calls `lost` if it cannot. */
  offer(asked: Asked, lost: () => void): void;
  /** The question was settled (elsewhere, or by the run): stop asking. */
  withdraw(asked: Asked): void;
}

/** One question while it waits. */
export class Asked {
  readonly id = crypto.randomUUID();
  readonly askedAt = Date.now();
  private settled = false;

  constructor(
    readonly question: Question,
    /** Which session asks, and which run (null: a tool call such as artifact_forward). */
    readonly where: Where,
    private readonly settle: (outcome: Outcome) => void,
  ) {}

  get open(): boolean {
    return !this.settled;
  }

  /** The first answer wins; a later one (another channel, or after expiry) is refused with false. */
  answer(channel: ChannelName, reply: Reply): boolean {
    return this.end({ answered: true, channel, reply });
  }

  end(outcome: Outcome): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.settle(outcome);
    return true;
  }
}

export interface Where {
  sessionId: string;
  runId: string | null;
}

export interface AskOptions {
  signal: AbortSignal;
  timeoutMs: number;
  where: Where;
  /** Called once the question is put (not when nobody could be asked): the caller's wait grows. */
  onWait?: () => void;
}

/** A question while it waits, and the channels it was put to. */
interface Waiting {
  asked: Asked;
  offeredTo: Set<Channel>;
}

/** The questions of one run and the channels attached to it. */
export class Questions {
  private readonly channels = new Set<Channel>();
  private readonly waiting = new Map<string, Waiting>();
  /** Told whenever a question starts or stops waiting (progress, python_run, the viewer). */
  readonly listeners = new Set<() => void>();

  /** Adds a channel: it is offered every question waiting that it reaches. Returns its removal. */
  attach(channel: Channel): () => void {
    this.channels.add(channel);
    for (const entry of this.waiting.values()) this.offer(entry, channel);
    return () => {
      this.channels.delete(channel);
      for (const entry of this.waiting.values()) {
        if (!entry.offeredTo.delete(channel)) continue;
        channel.withdraw(entry.asked);
        // Another request of the same kind may carry it now.
        for (const other of this.channels) this.offer(entry, other);
      }
    };
  }

  /**
   * An attached channel reaches the person now where it could not before (a viewer page opened): it is
   * offered every question waiting that it reaches, as if it had just been attached.
   */
  offerWaiting(channel: Channel): void {
    if (!this.channels.has(channel)) return;
    for (const entry of this.waiting.values()) this.offer(entry, channel);
  }

  /**
   * The questions waiting that `channel` would put to the person if attached now: those it reaches
   * that no other request of its kind carries already (a python_run poll while another one asks).
   */
  carriable(channel: Channel): Asked[] {
    return [...this.waiting.values()]
      .filter(
        (entry) => entry.asked.open && channel.reaches(entry.asked.question) && !this.carried(entry, channel),
      )
      .map((entry) => entry.asked);
  }

  /** Whether any attached channel could put this question to the person. */
  private reachable(question: Question): boolean {
    for (const channel of this.channels) if (channel.reaches(question)) return true;
    return false;
  }

  async ask(question: Question, { signal, timeoutMs, where, onWait }: AskOptions): Promise<Outcome> {
    if (signal.aborted) return { answered: false, why: "cancelled" };
    if (!this.reachable(question)) return { answered: false, why: "no_channel" };
    if (this.waiting.size >= QUESTIONS_PER_RUN_MAX) return { answered: false, why: "no_channel" };
    let settle!: (outcome: Outcome) => void;
    const outcome = new Promise<Outcome>((resolve) => {
      settle = resolve;
    });
    const asked = new Asked(question, where, settle);
    onWait?.();
    const entry = { asked, offeredTo: new Set<Channel>() };
    this.waiting.set(asked.id, entry);
    const onAbort = () => asked.end({ answered: false, why: "cancelled" });
    signal.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(() => asked.end({ answered: false, why: "timed_out" }), timeoutMs);
    this.changed();
    for (const channel of this.channels) this.offer(entry, channel);
    try {
      return await outcome;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      this.waiting.delete(asked.id);
      for (const channel of entry.offeredTo) channel.withdraw(asked);
      this.changed();
    }
  }

  /** What the person is being asked, for a status line: "approval of crm.delete_record", "input". */
  describeWaiting(): string | undefined {
    const first = this.waiting.values().next().value?.asked.question;
    if (!first) return undefined;
    const what =
      first.kind === "approval"
        ? `approval of ${first.server}.${first.tool}`
        : first.kind === "network"
          ? `a network approval of ${first.host}:${first.port}`
          : "an answer to input()";
    const more = this.waiting.size - 1;
    return more > 0 ? `${what} (and ${more} more)` : what;
  }

  /**
   * A question goes to the person once per kind of channel: a second request of the same client (or of
   * another one on the session) does not ask it again while one carries it.
   */
  private offer(entry: Waiting, channel: Channel): void {
    if (!entry.asked.open || entry.offeredTo.has(channel) || !channel.reaches(entry.asked.question)) return;
    if (this.carried(entry, channel)) return;
    entry.offeredTo.add(channel);
    channel.offer(entry.asked, () => this.lost(entry, channel));
  }

  /** Whether another channel of `channel`'s kind (not a stand-in) has the question already. */
  private carried(entry: Waiting, channel: Channel): boolean {
    if (channel.standsIn) return false;
    for (const other of entry.offeredTo)
      if (other !== channel && other.name === channel.name && !other.standsIn) return true;
    return false;
  }

  /**
   * A channel could not ask after all (the client failed the request): another of its kind may, and
   * with none left, nobody can.
   */
  private lost(entry: Waiting, channel: Channel): void {
    entry.offeredTo.delete(channel);
    for (const other of this.channels) if (other !== channel) this.offer(entry, other);
    if (entry.offeredTo.size === 0) entry.asked.end({ answered: false, why: "no_channel" });
  }

  /** Resolves once none of `asked` still waits (a poll that put them to its client), or on abort. */
  async settled(asked: Asked[], signal: AbortSignal): Promise<void> {
    const open = () => asked.some((one) => one.open);
    if (!open() || signal.aborted) return;
    await new Promise<void>((resolve) => {
      const check = () => {
        if (open() && !signal.aborted) return;
        this.listeners.delete(check);
        signal.removeEventListener("abort", check);
        resolve();
      };
      this.listeners.add(check);
      signal.addEventListener("abort", check, { once: true });
    });
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}
