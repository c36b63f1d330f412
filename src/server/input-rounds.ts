// Asking the person under 2026-07-28, where a server cannot send requests of its own: a call whose run
// waits for the person answers with an input_required result (elicitation forms, and a request state)
// while the run stays parked; the client retries the same call with the answers and that state, and the
// parked call goes on from where it waited, never started again. The state is signed (HMAC), expires,
// names one parked call of this client and one round of it, so it cannot be forged, replayed or used by
// another client: a bad one is refused before anything happens.
import { createRequestStateCodec } from "@modelcontextprotocol/server";
import * as v from "valibot";
import { ProtocolError } from "../errors.ts";
import { ELICITATION_MARGIN_MS } from "../limits.ts";
import type { Asked, Channel } from "../person/questions.ts";
import { ElicitResponse, formFor, replyFrom } from "./elicitation.ts";

export const INVALID_STATE = "Invalid or expired requestState: call the tool again without it";

const State = v.object({ park: v.string(), round: v.number(), tool: v.string() });
type State = v.InferOutput<typeof State>;

type InputRequired = {
  resultType: "input_required";
  inputRequests: Record<string, { method: "elicitation/create"; params: ReturnType<typeof formFor> }>;
  requestState: string;
};

/** One call that waits for the person between rounds. */
class Parked {
  readonly id = crypto.randomUUID();
  round = 0;
  readonly controller = new AbortController();
  /** Questions offered to this call and not yet settled, by id; `sent`: put to the client already. */
  readonly open = new Map<string, Asked>();
  sent = new Set<string>();
  result!: Promise<{ done: unknown } | { failed: unknown }>;
  private wake: (() => void) | undefined;
  expiry: ReturnType<typeof setTimeout> | undefined;

  readonly channel: Channel = {
    name: "elicitation",
    reaches: (question) => !(question.kind === "input" && question.secret),
    offer: (asked) => {
      this.open.set(asked.id, asked);
      this.wake?.();
    },
    withdraw: (asked) => {
      this.open.delete(asked.id);
    },
  };

  /** Resolves when a question not yet sent is offered. */
  unsentQuestion(): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if ([...this.open.values()].some((asked) => asked.open && !this.sent.has(asked.id))) {
          this.wake = undefined;
          resolve();
        }
      };
      this.wake = check;
      check();
    });
  }
}

export class InputRounds {
  private readonly parked = new Map<string, Parked>();
  private readonly codec;

  constructor(private readonly timeoutMs: number) {
    // One process serves every round of a flow, so a key of its own is enough.
    this.codec = createRequestStateCodec<State>({
      key: crypto.getRandomValues(new Uint8Array(32)),
      ttlSeconds: Math.ceil((timeoutMs + ELICITATION_MARGIN_MS) / 1000),
    });
  }

  /**
   * Serves one round of a call: the first starts it (`start`), a retry carries `requestState` and the
   * answers. Answers the tool's result, or input_required while the person is asked.
   */
  async serve<T>(
    tool: string,
    requestState: unknown,
    responses: Record<string, unknown> | undefined,
    signal: AbortSignal,
    /** Starts the call with the signal that cancels it and the channel that asks the person. */
    start: (signal: AbortSignal, elicitation: Channel) => Promise<T>,
  ): Promise<{ done: T } | { inputRequired: InputRequired }> {
    let parked: Parked;
    if (requestState === undefined) {
      parked = new Parked();
      parked.result = start(parked.controller.signal, parked.channel).then(
        (done) => ({ done }),
        (failed: unknown) => ({ failed }),
      );
    } else {
      parked = await this.resume(tool, requestState);
      for (const [key, response] of Object.entries(responses ?? {})) {
        const asked = parked.open.get(key);
        const parsed = v.safeParse(ElicitResponse, response);
        if (!asked || !parked.sent.has(key) || !parsed.success) continue;
        asked.answer("elicitation", replyFrom(asked.question, parsed.output));
        parked.open.delete(key);
      }
      // What the client left unanswered is asked again in the next round.
      parked.sent = new Set();
    }
    clearTimeout(parked.expiry);
    // The client's cancel of this round is a cancel of the call.
    const cancel = () => parked.controller.abort();
    signal.addEventListener("abort", cancel, { once: true });
    try {
      const next = await Promise.race([parked.result, parked.unsentQuestion().then(() => undefined)]);
      if (next) {
        this.parked.delete(parked.id);
        if ("failed" in next) throw next.failed;
        // The call that finished is the one `start` began for this tool: its value is a T.
        return { done: next.done as T };
      }
      return { inputRequired: await this.ask(tool, parked) };
    } finally {
      signal.removeEventListener("abort", cancel);
    }
  }

  private async ask(tool: string, parked: Parked): Promise<InputRequired> {
    parked.round += 1;
    this.parked.set(parked.id, parked);
    const inputRequests: InputRequired["inputRequests"] = {};
    for (const [id, asked] of parked.open) {
      if (!asked.open) continue;
      parked.sent.add(id);
      inputRequests[id] = { method: "elicitation/create", params: formFor(asked.question) };
    }
    // A client that never comes back: the questions expire on their own; the record goes after them.
    parked.expiry = setTimeout(() => this.parked.delete(parked.id), this.timeoutMs + ELICITATION_MARGIN_MS);
    parked.expiry.unref?.();
    const requestState = await this.codec.mint({ park: parked.id, round: parked.round, tool });
    return { resultType: "input_required", inputRequests, requestState };
  }

  /** The parked call a request state names, if it is genuine, current and for this tool. */
  private async resume(tool: string, requestState: unknown): Promise<Parked> {
    if (typeof requestState !== "string") throw new ProtocolError(INVALID_STATE);
    let state: State;
    try {
      state = v.parse(State, await this.codec.verify(requestState, undefined as never));
    } catch {
      throw new ProtocolError(INVALID_STATE);
    }
    const parked = this.parked.get(state.park);
    if (!parked || parked.round !== state.round || state.tool !== tool)
      throw new ProtocolError(INVALID_STATE);
    // Each state is good for one retry: the next round mints a new one.
    parked.round += 1;
    return parked;
  }
}
