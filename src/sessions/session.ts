// A session: a named namespace bound to a project directory and an interpreter, with its own worker,
// run history and generation.
import { randomUUID } from "node:crypto";
import type { Bridge } from "../worker/rpc.ts";
import { Supervisor } from "../worker/supervisor.ts";
import type { EnvironmentSource } from "./interpreter.ts";
import type { ProbeResult } from "./probe.ts";

export interface SessionOptions {
  serverId: string;
  name: string;
  project: string;
  python: string;
  source: EnvironmentSource;
  /** Set when the interpreter was checked before the session was published. */
  probe?: ProbeResult;
  /** A reason no worker can start (the server default interpreter is missing). */
  problem?: string;
  maxMemoryMib: number;
  /** Makes the bridge for this session's cells once its id exists. */
  bridge: (sessionId: string) => Bridge;
}

export class Session {
  readonly id = randomUUID();
  readonly serverId: string;
  readonly name: string;
  readonly project: string;
  readonly python: string;
  readonly source: EnvironmentSource;
  readonly probe: ProbeResult | undefined;
  readonly problem: string | undefined;
  readonly supervisor: Supervisor;
  closed = false;

  constructor(options: SessionOptions) {
    this.serverId = options.serverId;
    this.name = options.name;
    this.project = options.project;
    this.python = options.python;
    this.source = options.source;
    this.probe = options.probe;
    this.problem = options.problem;
    this.supervisor = new Supervisor({
      serverId: options.serverId,
      sessionId: this.id,
      maxMemoryMib: options.maxMemoryMib,
      bridge: options.bridge(this.id),
      launch: {
        python: options.python,
        problem: options.problem,
        cwd: options.project,
        env: workerEnv(),
      },
    });
  }

  get runtimeStatus(): "lazy" | "running" | "stopped" | "closed" {
    if (this.closed) return "closed";
    if (this.supervisor.running) return "running";
    return this.supervisor.generation === 0 ? "lazy" : "stopped";
  }
}

/** Workers and probes get the server's environment, minus nothing, plus the no-recursion switch. */
export function workerEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) out[key] = value;
  // A repl-mcp started from inside a cell must not broker MCP calls through this one.
  out.REPL_MCP_NO_BRIDGE = "1";
  return out;
}
