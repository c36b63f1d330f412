// What a session's cells may ask of the broker: the operations of the `mcp` helper, each checked at
// the boundary and handed to the project's broker with the session and run they came from.
import * as v from "valibot";
import type { Broker } from "../broker/broker.ts";
import { validServerName } from "../broker/config.ts";
import type { JournalView } from "../broker/journal.ts";
import { ReplError } from "../errors.ts";
import {
  BROKER_CALL_TIMEOUT_DEFAULT_SECONDS,
  BROKER_LIST_TIMEOUT_DEFAULT_SECONDS,
  EXPLAIN_TOOL_MAX_CHARS,
  INPUT_PROMPT_MAX_CHARS,
} from "../limits.ts";
import type { Questions } from "../person/questions.ts";
import type { Bridge } from "../worker/rpc.ts";
import type { SessionArtifacts } from "./artifacts.ts";
import type { SessionAsking } from "./asking.ts";

const Server = v.pipe(v.string(), v.check(validServerName));
const Timeout = v.optional(v.number(), BROKER_CALL_TIMEOUT_DEFAULT_SECONDS);

const Ops = {
  call: v.object({
    server: Server,
    tool: v.pipe(v.string(), v.minLength(1)),
    arguments: v.optional(v.unknown(), {}),
    timeout: Timeout,
    /** mcp.<server>.<tool>() asks for the journal id too, for the McpToolError it may raise. */
    with_journal_id: v.optional(v.boolean(), false),
  }),
  tools: v.object({ server: Server, timeout: v.optional(v.number(), BROKER_LIST_TIMEOUT_DEFAULT_SECONDS) }),
  input: v.object({
    prompt: v.pipe(v.string(), v.maxLength(INPUT_PROMPT_MAX_CHARS)),
    secret: v.boolean(),
  }),
  explain: v.object({
    server: Server,
    tool: v.optional(
      v.nullable(v.pipe(v.string(), v.minLength(1), v.maxLength(EXPLAIN_TOOL_MAX_CHARS))),
      null,
    ),
  }),
};

function parse<S extends v.GenericSchema>(schema: S, params: unknown, op: string): v.InferOutput<S> {
  const parsed = v.safeParse(schema, params);
  if (!parsed.success)
    throw new ReplError("BRIDGE_INVALID", `Invalid parameters for mcp ${op}; see the mcp helper's signature`);
  return parsed.output;
}

export function brokerBridge(
  broker: Broker,
  journal: JournalView,
  sessionId: string,
  artifacts: SessionArtifacts,
  asking: SessionAsking,
  /** The questions of the run `runId` while it is the active one. */
  questionsOf: (runId: string) => Questions | undefined,
): Bridge {
  return async (op, params, { runId, signal, workerPid, extendWait }) => {
    const approve = asking.approver(questionsOf(runId), runId, extendWait);
    if (artifacts.isRpc(op)) return artifacts.rpc(op, params, { runId, signal, workerPid, approve });
    switch (op) {
      case "call": {
        const p = parse(Ops.call, params, op);
        if (!p.with_journal_id)
          return broker.call(p.server, p.tool, p.arguments, p.timeout, { sessionId, runId, signal, approve });
        let journalId: string | null = null;
        const result = await broker.call(p.server, p.tool, p.arguments, p.timeout, {
          sessionId,
          runId,
          signal,
          approve,
          onDispatch: (record) => {
            journalId = record.id;
          },
        });
        return { result, journal_id: journalId };
      }
      case "input": {
        const p = parse(Ops.input, params, op);
        const questions = questionsOf(runId);
        if (!questions) throw new ReplError("INPUT_UNANSWERED", "input() was called after its cell ended");
        return asking.input(questions, runId, p.prompt, p.secret, signal, extendWait);
      }
      case "tools": {
        const p = parse(Ops.tools, params, op);
        return broker.tools(p.server, p.timeout, signal);
      }
      case "servers":
        return broker.servers();
      case "generation":
        return broker.generation();
      case "refresh":
        return broker.refresh();
      case "journal":
        return journal.list();
      case "explain": {
        const p = parse(Ops.explain, params, op);
        return broker.explain(p.server, p.tool);
      }
      default:
        throw new ReplError("BRIDGE_INVALID", `Unknown bridge operation "${op.slice(0, 40)}"`);
    }
  };
}
