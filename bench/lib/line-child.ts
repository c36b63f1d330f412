// A Python program spoken to in JSON lines over its stdin/stdout, driven straight from the benchmark
// with no server in between: worker.py exactly as the server starts it, or the floor's eval loop.
// Timing these alone is what splits a round trip into the server's share and Python's share.
import type { Subprocess } from "bun";
import { BOOTSTRAP } from "../../src/worker/source.ts";

type Frame = Record<string, unknown>;

export class LineChild {
  private readonly proc: Subprocess<"pipe", "pipe", "ignore">;
  private readonly waiting: { match: (frame: Frame) => boolean; resolve: (frame: Frame) => void }[] = [];
  private readonly exited: Promise<number>;

  constructor(argv: string[], env: Record<string, string>, cwd: string) {
    this.proc = Bun.spawn(argv, { env, cwd, stdin: "pipe", stdout: "pipe", stderr: "ignore" });
    this.exited = this.proc.exited;
    void this.read();
  }

  get pid(): number {
    return this.proc.pid;
  }

  /** The first frame (from now on) for which match is true. */
  next(match: (frame: Frame) => boolean): Promise<Frame> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ match, resolve });
      void this.exited.then(() => reject(new Error("the Python program exited while awaited")));
    });
  }

  send(frame: Frame): void {
    this.proc.stdin.write(`${JSON.stringify(frame)}\n`);
    void this.proc.stdin.flush();
  }

  /** Ends stdin and waits for the exit; a program that does not leave within 5 s is killed. */
  async stop(): Promise<void> {
    try {
      this.proc.stdin.end();
    } catch {}
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), 5_000);
    await this.exited;
    clearTimeout(timer);
  }

  private async read(): Promise<void> {
    const decoder = new TextDecoder();
    let pending = "";
    for await (const chunk of this.proc.stdout) {
      pending += decoder.decode(chunk, { stream: true });
      for (let newline = pending.indexOf("\n"); newline >= 0; newline = pending.indexOf("\n")) {
        const frame = JSON.parse(pending.slice(0, newline)) as Frame;
        pending = pending.slice(newline + 1);
        const index = this.waiting.findIndex((waiter) => waiter.match(frame));
        if (index >= 0) this.waiting.splice(index, 1)[0]?.resolve(frame);
      }
    }
  }
}

/** worker.py started as the server starts it (`python -u -c BOOTSTRAP path`), pipes in place of the guardian. */
export class LoneWorker {
  private runs = 0;

  private constructor(readonly child: LineChild) {}

  /** Spawns the worker; resolves once its ready frame arrived, with the milliseconds that took. */
  static async start(python: string, script: string, env: Record<string, string>, cwd: string) {
    const started = performance.now();
    const child = new LineChild([python, "-u", "-c", BOOTSTRAP, script], env, cwd);
    await child.next((frame) => frame.type === "ready");
    return { worker: new LoneWorker(child), readyMs: performance.now() - started };
  }

  /** One cell, execute frame → result frame, as the server would send it; resolves with the result. */
  async execute(code: string): Promise<Frame> {
    const id = `bench-${++this.runs}`;
    const result = this.child.next((frame) => frame.type === "result" && frame.id === id);
    this.child.send({ type: "execute", id, code, reset: false, timeout: 60, artifact_enabled: true });
    return (await result).result as Frame;
  }
}

/** The composed floor's eval loop, alone. */
export class LoneEvalLoop {
  private requests = 0;

  private constructor(readonly child: LineChild) {}

  /** Spawns the loop; it has no ready frame, so the first request waits for its start-up. */
  static start(python: string, script: string, env: Record<string, string>, cwd: string): LoneEvalLoop {
    return new LoneEvalLoop(new LineChild([python, "-u", script], env, cwd));
  }

  async execute(code: string): Promise<Frame> {
    const id = ++this.requests;
    const reply = this.child.next((frame) => frame.id === id);
    this.child.send({ id, code });
    return reply;
  }
}
