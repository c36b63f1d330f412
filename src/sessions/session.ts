// A session: a named namespace bound to a project directory and an interpreter, with its own worker.
import { randomUUID } from "node:crypto";
import { Supervisor } from "../worker/supervisor.ts";
import type { Interpreter } from "./interpreter.ts";

export interface SessionOptions {
  serverId: string;
  name: string;
  project: string;
  interpreter: Interpreter;
  maxMemoryMib: number;
}

export class Session {
  readonly id = randomUUID();
  readonly name: string;
  readonly project: string;
  readonly interpreter: Interpreter;
  readonly supervisor: Supervisor;
  readonly serverId: string;

  constructor(options: SessionOptions) {
    this.serverId = options.serverId;
    this.name = options.name;
    this.project = options.project;
    this.interpreter = options.interpreter;
    this.supervisor = new Supervisor({
      serverId: options.serverId,
      sessionId: this.id,
      maxMemoryMib: options.maxMemoryMib,
      launch: {
        python: options.interpreter.path,
        problem: options.interpreter.problem,
        cwd: options.project,
        // Workers must not broker MCP calls themselves through a nested repl-mcp.
        env: { ...stringEnv(process.env), REPL_MCP_NO_BRIDGE: "1" },
      },
    });
  }
}

function stringEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  return out;
}
