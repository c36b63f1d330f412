// The reference servers' side of bench/references/eval-loop.py: one JSON line per request on its stdin,
// one per reply on its stdout. A cell may also ask the server something mid-run (the floor bridge's
// `call`): such a line carries "call" instead of "id", and its answer goes back as one line on stdin.
import type { Subprocess } from "bun";

export interface EvalReply {
  id: number;
  value?: string | null;
  error?: string;
}

/** A cell's request to the server: {"call": tool, "arguments": {...}}. */
export interface CellCall {
  call: string;
  arguments: Record<string, unknown>;
}

export type CallHandler = (request: CellCall) => Promise<unknown>;

/** A line-oriented JSON client of the eval loop; one outstanding request per id. */
export class EvalLoop {
  private proc: Subprocess<"pipe", "pipe", "inherit"> | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, (reply: EvalReply) => void>();

  constructor(
    private readonly python: string,
    private readonly script: string,
    private readonly onCall?: CallHandler,
  ) {}

  run(code: string): Promise<EvalReply> {
    const proc = this.ensure();
    const id = this.nextId++;
    const reply = new Promise<EvalReply>((resolve) => this.waiting.set(id, resolve));
    this.write(proc, { id, code });
    return reply;
  }

  stop(): void {
    this.proc?.kill("SIGKILL");
  }

  private write(proc: Subprocess<"pipe", "pipe", "inherit">, message: unknown): void {
    proc.stdin.write(`${JSON.stringify(message)}\n`);
    void proc.stdin.flush();
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

  private answer(proc: Subprocess<"pipe", "pipe", "inherit">, request: CellCall): void {
    const handler = this.onCall ?? (() => Promise.reject(new Error("this server takes no calls")));
    handler(request).then(
      (result) => this.write(proc, { result }),
      (error) => this.write(proc, { error: String((error as Error).message ?? error) }),
    );
  }

  private async read(proc: Subprocess<"pipe", "pipe", "inherit">): Promise<void> {
    const decoder = new TextDecoder();
    let pending = "";
    for await (const chunk of proc.stdout) {
      pending += decoder.decode(chunk, { stream: true });
      let newline = pending.indexOf("\n");
      while (newline >= 0) {
        const message = JSON.parse(pending.slice(0, newline)) as EvalReply | CellCall;
        pending = pending.slice(newline + 1);
        if ("call" in message) {
          this.answer(proc, message);
        } else {
          this.waiting.get(message.id)?.(message);
          this.waiting.delete(message.id);
        }
        newline = pending.indexOf("\n");
      }
    }
    for (const [id, resolve] of this.waiting) resolve({ id, error: "eval loop exited" });
    this.waiting.clear();
  }
}
