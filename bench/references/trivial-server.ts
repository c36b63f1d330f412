// Reference server for the benchmark, compiled by bench/run.ts into a temp dir with the same flags as
// release/build.ts. It is the smallest MCP server the SDK allows, served over stdio the way the product
// is: the low-level Server behind the SDK's `serveStdio` entry (both protocol eras, the SDK's own stdio
// transport), one tool that does nothing.
//
//   trivial-server                               the MCP floor: only `noop`
//   trivial-server --eval-loop PYTHON SCRIPT     the composed floor: also `execute_python`, which forwards
//                                                the code to SCRIPT (bench/references/eval-loop.py) run by
//                                                PYTHON, spawned directly on the first call (no guardian)
//
// It exits when its stdin ends, killing the eval loop first, so the benchmark never leaves it behind.
import { Server, type Tool } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import type { Subprocess } from "bun";

interface EvalReply {
  id: number;
  value?: string | null;
  error?: string;
}

/** A line-oriented JSON client of the eval loop; one outstanding request per id. */
class EvalLoop {
  private proc: Subprocess<"pipe", "pipe", "inherit"> | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, (reply: EvalReply) => void>();

  constructor(
    private readonly python: string,
    private readonly script: string,
  ) {}

  /** The interpreter's pid once started (the benchmark reads its RSS). */
  get pid(): number | undefined {
    return this.proc?.pid;
  }

  run(code: string): Promise<EvalReply> {
    const proc = this.ensure();
    const id = this.nextId++;
    const reply = new Promise<EvalReply>((resolve) => this.waiting.set(id, resolve));
    proc.stdin.write(`${JSON.stringify({ id, code })}\n`);
    void proc.stdin.flush();
    return reply;
  }

  stop(): void {
    this.proc?.kill("SIGKILL");
  }

  private ensure(): Subprocess<"pipe", "pipe", "inherit"> {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) return this.proc;
    const proc = Bun.spawn([this.python, "-u", this.script], {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "inherit",
    });
    this.proc = proc;
    void this.read(proc);
    return proc;
  }

  private async read(proc: Subprocess<"pipe", "pipe", "inherit">): Promise<void> {
    const decoder = new TextDecoder();
    let pending = "";
    for await (const chunk of proc.stdout) {
      pending += decoder.decode(chunk, { stream: true });
      let newline = pending.indexOf("\n");
      while (newline >= 0) {
        const reply = JSON.parse(pending.slice(0, newline)) as EvalReply;
        pending = pending.slice(newline + 1);
        this.waiting.get(reply.id)?.(reply);
        this.waiting.delete(reply.id);
        newline = pending.indexOf("\n");
      }
    }
    for (const [id, resolve] of this.waiting) resolve({ id, error: "eval loop exited" });
    this.waiting.clear();
  }
}

const argv = process.argv.slice(2);
let evalLoop: EvalLoop | undefined;
if (argv[0] === "--eval-loop") {
  const [, python, script] = argv;
  if (!python || !script) {
    process.stderr.write("usage: trivial-server [--eval-loop PYTHON SCRIPT]\n");
    process.exit(2);
  }
  evalLoop = new EvalLoop(python, script);
}

const noop: Tool = {
  name: "noop",
  description: "Does nothing.",
  inputSchema: { type: "object", properties: {} },
};
const executePython: Tool = {
  name: "execute_python",
  description: "Runs Python in a persistent eval loop.",
  inputSchema: { type: "object", properties: { code: { type: "string" } }, required: ["code"] },
};
const tools = evalLoop ? [noop, executePython] : [noop];

function createServer(): Server {
  const server = new Server({ name: "trivial-server", version: "0.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler("tools/list", async () => ({ tools }));
  server.setRequestHandler("tools/call", async (request) => {
    const { name, arguments: args } = request.params;
    if (name === "noop") return { content: [{ type: "text", text: "ok" }] };
    if (name === "execute_python" && evalLoop) {
      const reply = await evalLoop.run(String(args?.code ?? ""));
      if (reply.error !== undefined) return { content: [{ type: "text", text: reply.error }], isError: true };
      return { content: [{ type: "text", text: reply.value ?? "" }] };
    }
    throw new Error(`unknown tool ${name}`);
  });
  return server;
}

process.stdin.on("end", () => {
  evalLoop?.stop();
  process.exit(0);
});

serveStdio(createServer);
