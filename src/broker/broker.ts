// The broker of one project (or of an explicit --config): which servers a cell may use, and the
// calls themselves — allowedTools checked before connecting, arguments checked before dispatch, a
// journal record for everything dispatched, and nothing dispatched ever retried.
import * as v from "valibot";
import { describe, ReplError } from "../errors.ts";
import {
  BROKER_CONCURRENT_REQUESTS,
  BROKER_REGISTRY_REFRESH_MS,
  BROKER_RESULT_MAX_BYTES,
  TIMEOUT_MAX_SECONDS,
  TIMEOUT_MIN_SECONDS,
} from "../limits.ts";
import { utf8Bytes } from "../text/utf8.ts";
import { approvalQuestion, needsApproval, notApproved } from "./approval.ts";
import { checkArguments, validateAgainstSchema } from "./arguments.ts";
import { Catalogues, granted, type Tool } from "./catalogue.ts";
import type { ServerEntry } from "./config.ts";
import { type Connection, ConnectionPool, transportKey } from "./connections.ts";
import { explain } from "./explain.ts";
import {
  JOURNAL_UNKNOWN_WRITE_FAILED,
  JOURNAL_WRITE_FAILED,
  type Journal,
  type JournalApproval,
  type JournalRecord,
  type Verdict,
} from "./journal.ts";
import { ownCause, peerProblem, timedOut } from "./peer-fault.ts";
import { type ExclusionReason, loadRegistry, type Registry, type RegistryOptions } from "./registry.ts";
import { Semaphore } from "./semaphore.ts";

export interface CallContext {
  sessionId: string;
  runId: string | null;
  signal?: AbortSignal;
  /**
   * Told the moment the call is journaled and sent (a later cancellation may not have stopped it), with
   * its journal record.
   */
  onDispatch?: (record: JournalRecord) => void;
  /**
   * Asks the person about a call the registry's `approve` names (the session supplies it); without
   * one, nobody can be asked and such calls are refused.
   */
  approve?: (question: ApprovalQuestion, signal?: AbortSignal) => Promise<Verdict>;
}

export type ApprovalQuestion = ReturnType<typeof approvalQuestion>;

const UNKNOWN_SERVER =
  "Unknown or unauthorized MCP server; use mcp.servers() and explicit --config, then mcp.refresh()";
const DENIED =
  "Tool denied by broker allowedTools policy; add it to allowedTools in the registry, then mcp.refresh()";
const UNKNOWN_TOOL = "Unknown or unauthorized MCP tool; inspect mcp.list_tools(server)";

/** The `broker` block of python_health and the answer of mcp.refresh(). */
export const BrokerHealth = v.object({
  configured_servers: v.number(),
  connected_transports: v.number(),
  configuration_error: v.nullable(v.string()),
  max_concurrent_requests: v.number(),
  authentication: v.string(),
  journal: v.number(),
  enabled: v.boolean(),
  provenance: v.object({
    project: v.string(),
    scope: v.string(),
    registry: v.picklist(["explicit_config", "project_and_opt_in_scopes"]),
  }),
});
export type BrokerHealth = v.InferOutput<typeof BrokerHealth>;

export class Broker {
  private registry: Registry;
  private loadedAt = Date.now();
  /** Bumped whenever a reload changes the registry, and on every explicit refresh (see generation). */
  private registryGeneration = 0;
  private registryFingerprint: string;
  private readonly pool = new ConnectionPool();
  private readonly catalogues = new Catalogues();
  private readonly slots = new Semaphore(BROKER_CONCURRENT_REQUESTS);

  constructor(
    private readonly options: RegistryOptions,
    private readonly journal: Journal,
  ) {
    this.registry = loadRegistry(options);
    this.registryFingerprint = fingerprint(this.registry);
  }

  /**
   * Which registry cells see: a worker keeps the tool functions it built (mcp.<server>.<tool>) for as
   * long as this number stays the same, so it changes whenever the allowed servers or tools may have.
   */
  generation(): { generation: number; servers: string[] } {
    const servers = this.servers();
    return { generation: this.registryGeneration, servers };
  }

  get project(): string {
    return this.options.project;
  }

  /** Names cells may use; none while the broker is disabled (docs/broker.md: the registry is empty then). */
  servers(): string[] {
    const registry = this.current();
    this.refuseBroken(registry);
    if (registry.disabled) return [];
    return [...registry.servers.keys()].sort();
  }

  /** Every entry as loaded, broken registry or not (doctor lists them; cells use servers()). */
  serverEntries(): ServerEntry[] {
    return [...this.registry.servers.values()];
  }

  exclusions(): ReadonlyMap<string, ExclusionReason> {
    return this.registry.excluded;
  }

  async tools(server: string, timeoutSeconds: number, signal?: AbortSignal): Promise<Tool[]> {
    const deadline = this.deadline(timeoutSeconds);
    const entry = this.entry(server);
    const connection = await this.pool.get(entry, deadline, signal);
    return this.catalogue(connection, entry, deadline, signal);
  }

  async call(
    server: string,
    tool: string,
    args: unknown,
    timeoutSeconds: number,
    context: CallContext,
  ): Promise<Record<string, unknown>> {
    this.deadline(timeoutSeconds);
    const entry = this.entry(server);
    if (!granted(entry, tool)) throw new ReplError("TOOL_DENIED", DENIED);
    if (!args || typeof args !== "object" || Array.isArray(args)) {
      throw new ReplError("INVALID_ARGUMENT", "MCP arguments must be an object");
    }
    const argumentsObject = args as Record<string, unknown>;
    checkArguments(argumentsObject);
    const first = await this.connected(entry, tool, argumentsObject, timeoutSeconds, context, (definition) =>
      // Before the journal: a call the person has not approved is never sent.
      needsApproval(entry, definition) ? { ask: definition } : { send: undefined },
    );
    if ("sent" in first) return first.sent;
    // Outside the connection and the concurrency slot: the person may take minutes, and other calls go on.
    const approval = await this.approve(entry, first.ask, argumentsObject, context);
    // The call's own timeout counts from here: the time the person took is not the peer's.
    const second = await this.connected(entry, tool, argumentsObject, timeoutSeconds, context, () => ({
      send: approval,
    }));
    if ("sent" in second) return second.sent;
    throw new ReplError("INTERNAL", "An approved call was asked about twice");
  }

  /**
   * Holds a slot and the peer's connection while `then` decides, from the tool's definition (arguments
   * already checked against it), whether to send the call now.
   */
  private async connected(
    entry: ServerEntry,
    tool: string,
    args: Record<string, unknown>,
    timeoutSeconds: number,
    context: CallContext,
    decide: (definition: Tool) => { ask: Tool } | { send: JournalApproval | undefined },
  ): Promise<{ ask: Tool } | { sent: Record<string, unknown> }> {
    const deadline = this.deadline(timeoutSeconds);
    const { signal } = context;
    const release = await this.slots.acquire(deadline, signal);
    try {
      const connection = await this.pool.get(entry, deadline, signal);
      connection.enter();
      try {
        const tools = await this.catalogue(connection, entry, deadline, signal);
        const definition = tools.find((candidate) => candidate.name === tool);
        if (!definition) throw new ReplError("UNKNOWN_TOOL", UNKNOWN_TOOL);
        await validateAgainstSchema(definition.inputSchema, args);
        const decision = decide(definition);
        if ("ask" in decision) return decision;
        const remaining = deadline - Date.now();
        if (remaining <= 0) {
          throw new ReplError(
            "DEADLINE_EXCEEDED",
            "MCP deadline exceeded before dispatch; external outcome may be unknown",
          );
        }
        if (signal?.aborted) throw new ReplError("CANCELLED", "MCP call cancelled before dispatch");
        const approval = decision.send;
        const record = this.journal.dispatched({ ...this.callFields(entry.name, tool, context), approval });
        await this.journalDispatch(record);
        context.onDispatch?.(record);
        return { sent: await this.dispatch(connection, record, tool, args, remaining, signal) };
      } finally {
        connection.leave();
      }
    } finally {
      release();
    }
  }

  /** Asks the person (through the session's approver); a call not allowed is journalled and refused. */
  private async approve(
    entry: ServerEntry,
    tool: Tool,
    args: Record<string, unknown>,
    context: CallContext,
  ): Promise<JournalApproval> {
    const verdict: Verdict = context.approve
      ? await context.approve(approvalQuestion(entry, tool, args), context.signal)
      : { decision: "no_channel", channel: null };
    const approval = { ...verdict, decided_ms: Date.now() };
    if (verdict.decision === "allow_once" || verdict.decision === "allow_session") return approval;
    const status = verdict.decision === "deny" ? "denied" : "not_approved";
    this.journal.refused({ ...this.callFields(entry.name, tool.name, context), approval }, status);
    // Best effort: nothing was sent, so a journal file that cannot be written changes no outcome.
    await this.journal.persisted().catch(() => {});
    throw notApproved(entry.name, tool.name, verdict);
  }

  private callFields(server: string, tool: string, context: CallContext) {
    return {
      session_id: context.sessionId,
      project: this.options.project,
      run_id: context.runId,
      server,
      tool,
    };
  }

  /**
   * Reloads the registry now, forgetting failed connects; connections whose configuration disappeared
   * are closed. A registry that still fails to load fails the call, as every other operation does.
   */
  async refresh(): Promise<BrokerHealth> {
    await this.reload({ forgetFailures: true });
    this.refuseBroken(this.registry);
    return this.health();
  }

  explain(server: string, tool: string | null) {
    return explain(this.registry, this.pool, this.catalogues, server, tool);
  }

  health(): BrokerHealth {
    return {
      configured_servers: this.registry.servers.size,
      connected_transports: this.pool.liveCount,
      configuration_error: this.registry.error,
      max_concurrent_requests: BROKER_CONCURRENT_REQUESTS,
      authentication:
        "Static headers with environment placeholders resolved from the server's environment, or this broker's own OAuth " +
        "grants (repl-mcp --oauth-login for authorization_code, clientId/clientSecret for client_credentials). " +
        "Other clients' credentials are never read.",
      journal: this.journal.size,
      enabled: !this.registry.disabled,
      provenance: this.registry.provenance,
    };
  }

  async close(): Promise<void> {
    await this.pool.closeAll();
  }

  private async dispatch(
    connection: Connection,
    record: JournalRecord,
    tool: string,
    args: Record<string, unknown>,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<Record<string, unknown>> {
    let result: Record<string, unknown>;
    try {
      result = await connection.callTool(tool, args, { timeoutMs, signal });
    } catch (error) {
      this.journal.finish(record, "outcome_unknown");
      // The agent hears "outcome unknown" only once the journal file says so too (contract §5.7).
      try {
        await this.journal.persisted();
      } catch {
        throw new ReplError("JOURNAL_WRITE", JOURNAL_UNKNOWN_WRITE_FAILED);
      }
      if (signal?.aborted) {
        throw new ReplError(
          "CANCELLED",
          "MCP call cancelled; external outcome is unknown, request was not retried",
        );
      }
      if (timedOut(error)) {
        throw new ReplError(
          "DEADLINE_EXCEEDED",
          "MCP deadline exceeded; external outcome is unknown, request was not retried",
        );
      }
      const refused = this.refusedCredentials(error, connection);
      if (refused) {
        throw new ReplError(
          "CREDENTIALS_MISSING",
          `${refused.message}. The request was refused for its credentials; after a 401 it is repeated ` +
            "once with renewed ones, never more",
        );
      }
      const problem = peerProblem(error, connection.failure);
      if (problem) {
        throw new ReplError(
          "MCP_PROTOCOL",
          `${problem}; external outcome may be unknown, request was not retried`,
        );
      }
      throw new ReplError(
        "MCP_PROTOCOL",
        "MCP transport or protocol error; external outcome may be unknown, request was not retried",
      );
    }
    this.journal.finish(record, result.isError === true ? "tool_error" : "completed");
    try {
      await this.journal.persisted();
    } catch {
      throw new ReplError("JOURNAL_WRITE", JOURNAL_WRITE_FAILED);
    }
    if (utf8Bytes(JSON.stringify(result)) > BROKER_RESULT_MAX_BYTES) {
      throw new ReplError(
        "LIMIT_EXCEEDED",
        `MCP returned a known outcome for call ${record.id}, but its result exceeds the ${BROKER_RESULT_MAX_BYTES}-byte ` +
          "delivery budget; the call completed once and was not retried. Inspect the target system for its effect.",
      );
    }
    return result;
  }

  /** With --journal, a call is sent only once its dispatch record is on disk. */
  private async journalDispatch(record: JournalRecord): Promise<void> {
    try {
      await this.journal.persisted();
    } catch {
      this.journal.discard(record);
      throw new ReplError(
        "JOURNAL_WRITE",
        "MCP call was not sent: the durable journal could not be updated; check the --journal file, " +
          "its directory and free space",
      );
    }
  }

  /** The catalogue, with peer-supplied error text (it may echo credentials) replaced by our own. */
  private async catalogue(
    connection: Parameters<Catalogues["load"]>[0],
    entry: ServerEntry,
    deadline: number,
    signal?: AbortSignal,
  ): Promise<Tool[]> {
    try {
      return await this.catalogues.load(connection, entry, deadline, signal);
    } catch (error) {
      // First: the SDK client hands a transport's own ReplError through as it is.
      const refused = this.refusedCredentials(error, connection);
      if (refused) throw refused;
      if (error instanceof ReplError) throw error;
      if (signal?.aborted) throw new ReplError("CANCELLED", "MCP tool listing cancelled");
      if (timedOut(error)) {
        throw new ReplError("DEADLINE_EXCEEDED", "MCP deadline exceeded while listing tools");
      }
      const problem = peerProblem(error, connection.failure);
      if (problem) throw new ReplError("MCP_PROTOCOL", `${problem} while tools were listed`);
      throw new ReplError(
        "MCP_PROTOCOL",
        "MCP transport or protocol error while listing tools; peer details are omitted",
      );
    }
  }

  /**
   * A peer that refused even renewed credentials (a second 401, see http-transport.ts) cannot be used:
   * its connection is dropped and the failure remembered as credentials_missing, as at connect.
   */
  private refusedCredentials(error: unknown, connection: Connection): ReplError | undefined {
    const own = ownCause(error);
    if (own?.code !== "CREDENTIALS_MISSING") return undefined;
    void this.pool.refused(connection);
    return own;
  }

  private deadline(timeoutSeconds: number): number {
    if (
      !(
        Number.isFinite(timeoutSeconds) &&
        timeoutSeconds >= TIMEOUT_MIN_SECONDS &&
        timeoutSeconds <= TIMEOUT_MAX_SECONDS
      )
    ) {
      throw new ReplError(
        "LIMIT_EXCEEDED",
        `MCP timeout must be a finite number of seconds in ${TIMEOUT_MIN_SECONDS}..${TIMEOUT_MAX_SECONDS}`,
      );
    }
    return Date.now() + timeoutSeconds * 1000;
  }

  /** The registry, reloaded first when it is old. */
  private current(): Registry {
    if (Date.now() - this.loadedAt > BROKER_REGISTRY_REFRESH_MS) void this.reload({ forgetFailures: false });
    return this.registry;
  }

  private refuseBroken(registry: Registry): void {
    if (registry.error) {
      throw new ReplError(
        registry.errorCode ?? "CONFIG_INVALID",
        `MCP configuration error: ${registry.error}; repair registry then mcp.refresh()`,
      );
    }
  }

  /** The registry for an operation on a server: refused while it is broken or the broker is off. */
  private usable(): Registry {
    const registry = this.current();
    this.refuseBroken(registry);
    if (registry.disabled) {
      throw new ReplError(
        "BROKER_DISABLED",
        "The MCP broker is disabled (--mcp-scope none or REPL_MCP_NO_BRIDGE=1)",
      );
    }
    return registry;
  }

  private entry(server: string): ServerEntry {
    const entry = this.usable().servers.get(server);
    if (!entry) throw new ReplError("UNKNOWN_SERVER", UNKNOWN_SERVER);
    return entry;
  }

  /**
   * `forgetFailures`: an explicit refresh retries every failed peer at once; the automatic reload keeps
   * the cooldown of failed connects whose entry did not change.
   */
  private async reload({ forgetFailures }: { forgetFailures: boolean }): Promise<void> {
    this.loadedAt = Date.now();
    try {
      this.registry = loadRegistry(this.options);
    } catch (error) {
      this.registry = {
        ...this.registry,
        servers: new Map(),
        error: `MCP registry could not be loaded: ${describe(error)}`,
        errorCode: "CONFIG_INVALID",
      };
    }
    const now = fingerprint(this.registry);
    if (forgetFailures || now !== this.registryFingerprint) this.registryGeneration++;
    this.registryFingerprint = now;
    this.catalogues.clear();
    await this.pool.retain(new Set([...this.registry.servers.values()].map(transportKey)), forgetFailures);
  }
}

/** The parts of a registry that decide what cells may reach (entries are plain data). */
function fingerprint(registry: Registry): string {
  return JSON.stringify([registry.error, registry.disabled, [...registry.servers.entries()]]);
}
