// A keeping guardian (docs/architecture.md, "Parking"): the guardian of a kept session's worker. Unlike
// a plain guardian it holds the worker's three pipes itself and relays whole lines between the worker
// and the server that holds the session, over a Unix socket of its own in the parking directory. When
// that server goes (its connection or, before it connected, the lifeline closes) the worker is parked:
// it keeps running, a cell in progress goes on to its end, its frames are kept (bounded) for the next
// server, bridge requests are answered at once with an error, and one timer waits for the expiry. A
// server that proves it knows the parking secret adopts it and becomes its holder. At expiry, on an
// `end` request, or when the worker dies, everything goes (host.finish: the child, its jobs, its
// cleanup paths); a worker that died while parked leaves its record behind saying why.
import { unlinkSync } from "node:fs";
import type { Socket, UnixSocketListener } from "bun";
import * as v from "valibot";
import {
  ADOPT_HANDSHAKE_TIMEOUT_MS,
  FRAME_MAX_BYTES,
  KEEPER_RELAY_BACKLOG_MAX_BYTES,
  PARKED_FRAMES_MAX_BYTES,
} from "../limits.ts";
import { proofFor, sameProof, socketPath } from "../parking/place.ts";
import {
  GUARDIAN_LINE_PREFIX,
  KEEPER_PROTOCOL_VERSION,
  KeeperRequest,
  PARKED_RPC_ERROR,
  type RunningCell,
} from "../parking/protocol.ts";
import { type ParkedRecord, recordBase, removeRecord, writeRecord } from "../parking/record.ts";
import { decodeLine } from "../wire/lines.ts";
import type { GuardianEvent, KeepSpec, SpawnSpec } from "./protocol.ts";

export interface KeeperHost {
  /** Detached process groups the worker started (job frames), killed with everything else. */
  jobs: Set<number>;
  emit(event: GuardianEvent): void;
  /** Ends the child, its jobs and cleanup paths, then the guardian (calling `gone` on the way). */
  finish(code: number): Promise<never>;
}

type Child = ReturnType<typeof Bun.spawn<"pipe", "pipe", "pipe">>;

interface Connection {
  socket: Socket<Connection>;
  /**
   * hello: sent, waiting for a request; adopting: proven, waiting for the worker's ready frame;
   * holder: the session's server; closed: refused or done.
   */
  phase: "hello" | "adopting" | "holder" | "closed";
  nonce: string;
  cutter: LineCutter;
  outbox: Outbox;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** A line kept while parked: results are dropped last. */
interface KeptLine {
  bytes: Uint8Array;
  result: boolean;
}

const NEWLINE = 0x0a;
/** Where a frame's type begins: `{"type":"` is 9 bytes (the encoders on both sides put it first). */
const TYPE_AT = 9;
const encoder = new TextEncoder();
const ascii = new TextDecoder("latin1");
/** The ids of frames the guardian follows, read from a line's first bytes (the encoders put them there). */
const FRAME_HEAD = /^\{"type":"(execute|result|rpc|rpc_cancel|rpc_result|job)","id":("(?:[^"\\]|\\.)*"|null)/;
const EXECUTE_TIMEOUT = /^\{"type":"execute","id":"(?:[^"\\]|\\.)*","timeout":([0-9.eE+-]+)/;
/** Runs the server starts for itself (an inventory, the viewer's history) are not cells to adopt. */
const INTERNAL_RUN = /"(inventory|history)":true\}\n?$/;

export class Keeper {
  readonly child: Child;
  private record: ParkedRecord;
  private readonly dir: string;
  private listener: UnixSocketListener<Connection> | undefined;
  private holder: Connection | undefined;
  /** A proven connection waiting for the worker's ready frame to become the holder. */
  private adopting: Connection | undefined;
  /** Set once a holder connected: from then on only its connection, not the lifeline, is the server. */
  private everHeld = false;
  private ready: Uint8Array | undefined;
  private readyWaiters: (() => void)[] = [];
  private kept: KeptLine[] = [];
  private keptBytes = 0;
  private dropped = 0;
  private running: RunningCell | undefined;
  private readonly pendingRpc = new Set<string>();
  private expiry: ReturnType<typeof setTimeout> | undefined;
  private ending = false;
  private tombstone: string | undefined;
  private stdoutDone: Promise<void> = Promise.resolve();

  private constructor(
    child: Child,
    private readonly keep: KeepSpec,
    private readonly host: KeeperHost,
  ) {
    this.child = child;
    this.dir = keep.dir;
    this.record = {
      version: 1,
      key: keep.key,
      project: keep.project,
      name: keep.name,
      interpreter: keep.interpreter,
      python_version: null,
      generation: keep.generation,
      keep_seconds: keep.keep_seconds,
      state: "held",
      holder_pid: keep.holder_pid,
      started_at: Date.now(),
      parked_since: null,
      expires_at: null,
      guardian_pid: process.pid,
      worker_pid: null,
      boot_id: keep.boot_id,
      socket: socketPath(keep.dir, recordBase(keep.key, process.pid)),
      ...(keep.containment === undefined ? {} : { containment: keep.containment }),
    };
  }

  /** Starts the worker on pipes of its own, listens, records; undefined (having said why) if it could not. */
  static start(spec: SpawnSpec, keep: KeepSpec, host: KeeperHost): Keeper | undefined {
    let child: Child;
    try {
      child = Bun.spawn([spec.program, ...spec.args], {
        cwd: spec.cwd,
        env: spec.env,
        stdio: ["pipe", "pipe", "pipe"],
      });
    } catch (error) {
      host.emit({ type: "error", message: (error as Error).message });
      return undefined;
    }
    const keeper = new Keeper(child, keep, host);
    try {
      keeper.listen();
      keeper.save();
    } catch (error) {
      host.emit({ type: "error", message: `cannot keep the worker: ${(error as Error).message}` });
      child.kill("SIGKILL");
      return undefined;
    }
    host.emit({ type: "spawned", pid: child.pid });
    keeper.stdoutDone = keeper.relayStdout();
    void keeper.relayStderr();
    void child.exited.then(() => keeper.childExited());
    return keeper;
  }

  /** The lifeline (control fd) closed: before any server connected, that is the server going. */
  lifelineLost(): void {
    if (!this.everHeld) this.park();
  }

  /** Ends the worker for good: stdin EOF, SIGTERM after half the grace, the rest killed after it. */
  async end(graceMs: number): Promise<never> {
    this.ending = true;
    this.cancelExpiry();
    try {
      this.child.stdin.end();
    } catch {}
    if (graceMs > 0 && !(await exitsWithin(this.child, graceMs / 2))) {
      try {
        this.child.kill("SIGTERM");
      } catch {}
      await exitsWithin(this.child, graceMs / 2);
    }
    return await this.host.finish(0);
  }

  /** The guardian is about to exit: its record goes (or stays as a tombstone), and so does its socket. */
  gone(): void {
    // The record first: a server that sees the connection close must not find it any more.
    if (this.tombstone === undefined) removeRecord(this.dir, this.record);
    else {
      this.record = {
        ...this.record,
        state: "ended",
        holder_pid: null,
        ended_at: Date.now(),
        ended_reason: this.tombstone,
      };
      this.trySave();
    }
    try {
      unlinkSync(this.record.socket);
    } catch {}
    this.listener?.stop(true);
  }

  // -- the socket ---------------------------------------------------------------------------------

  private listen(): void {
    const path = this.record.socket;
    try {
      unlinkSync(path);
    } catch {}
    this.listener = Bun.listen<Connection>({
      unix: path,
      socket: {
        open: (socket) => this.opened(socket),
        data: (socket, chunk) => this.received(socket.data, chunk),
        drain: (socket) => socket.data.outbox.drain(),
        close: (socket) => this.closed(socket.data),
        error: (socket) => this.closed(socket.data),
      },
    }) as UnixSocketListener<Connection>;
  }

  private opened(socket: Socket<Connection>): void {
    const nonce = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex");
    const connection: Connection = {
      socket,
      phase: "hello",
      nonce,
      cutter: new LineCutter(FRAME_MAX_BYTES),
      outbox: new Outbox(socket),
      // A connection that never proves anything does not stay.
      timer: setTimeout(
        () => this.refuse(connection, "BAD_REQUEST", "no request in time"),
        ADOPT_HANDSHAKE_TIMEOUT_MS,
      ),
    };
    socket.data = connection;
    this.say(connection, { guardian: "hello", nonce, version: KEEPER_PROTOCOL_VERSION });
  }

  private received(connection: Connection, chunk: Uint8Array): void {
    if (connection.phase === "closed") return;
    let lines: Uint8Array[];
    try {
      lines = connection.cutter.push(chunk);
    } catch {
      this.drop(connection);
      return;
    }
    const forward: Uint8Array[] = [];
    for (const line of lines) {
      if (startsWith(line, GUARDIAN_LINE_PREFIX)) {
        if (forward.length) this.toWorker(forward.splice(0));
        this.request(connection, line);
        if (connection.phase !== "holder") return;
      } else if (connection.phase === "holder") {
        this.follow(line, "in");
        forward.push(line);
      } else {
        this.refuse(connection, "BAD_REQUEST", "frames before adoption");
        return;
      }
    }
    if (forward.length) this.toWorker(forward);
  }

  private request(connection: Connection, line: Uint8Array): void {
    let request: KeeperRequest;
    try {
      request = v.parse(KeeperRequest, JSON.parse(decodeLine(line)));
    } catch {
      this.refuse(connection, "BAD_REQUEST", "malformed request");
      return;
    }
    const proven =
      connection.phase === "holder" ||
      (request.proof !== undefined && sameProof(request.proof, proofFor(this.keep.secret, connection.nonce)));
    if (!proven) {
      this.refuse(connection, "WRONG_SECRET", "the proof does not match the parking secret");
      return;
    }
    clearTimeout(connection.timer);
    if (this.ending) {
      this.refuse(connection, "ENDING", "the worker is being ended");
      return;
    }
    const other =
      (this.holder ?? this.adopting) !== undefined && (this.holder ?? this.adopting) !== connection;
    if (request.guardian === "end") {
      if (other) {
        this.refuseHeld(connection);
        return;
      }
      this.say(connection, { guardian: "ending" });
      void this.end(request.grace_ms);
      return;
    }
    if (connection.phase !== "hello") return;
    if (other) {
      this.refuseHeld(connection);
      return;
    }
    void this.adopt(connection, request.holder);
  }

  /** Hands the worker to `connection` once its ready frame is in: the handshake, then what was kept. */
  private async adopt(connection: Connection, holderPid: number): Promise<void> {
    connection.phase = "adopting";
    this.adopting = connection;
    if (!this.ready) await new Promise<void>((resolve) => this.readyWaiters.push(resolve));
    if (this.adopting !== connection || this.ending) return;
    this.adopting = undefined;
    connection.phase = "holder";
    this.holder = connection;
    this.everHeld = true;
    const parkedSince = this.record.parked_since;
    this.cancelExpiry();
    this.record = {
      ...this.record,
      state: "held",
      holder_pid: holderPid,
      parked_since: null,
      expires_at: null,
    };
    this.say(connection, {
      guardian: "adopted",
      ready: JSON.parse(decodeLine(this.ready as Uint8Array)),
      generation: this.record.generation,
      pgid: process.pid,
      parked_since: parkedSince,
      dropped_frames: this.dropped,
      running: this.running ?? null,
      ...(this.record.containment === undefined ? {} : { containment: this.record.containment }),
    });
    if (this.running?.ended_at !== undefined) this.running = undefined;
    const kept = this.kept;
    this.kept = [];
    this.keptBytes = 0;
    this.dropped = 0;
    if (kept.length) connection.outbox.write(concat(kept.map((line) => line.bytes)));
    // The record after the answer: its fsync is not the adopting server's to wait for.
    this.trySave();
  }

  private refuseHeld(connection: Connection): void {
    this.refuse(
      connection,
      "SESSION_HELD",
      `held by the repl-mcp server with pid ${this.record.holder_pid}`,
      this.record.holder_pid,
    );
  }

  private refuse(connection: Connection, code: string, message: string, holder?: number | null): void {
    if (connection.phase === "holder" || connection.phase === "adopting") return;
    this.say(connection, { guardian: "refused", code, message, ...(holder === undefined ? {} : { holder }) });
    this.drop(connection);
  }

  private drop(connection: Connection): void {
    connection.socket.end();
    this.closed(connection);
  }

  private closed(connection: Connection | undefined): void {
    if (!connection || connection.phase === "closed") return;
    clearTimeout(connection.timer);
    connection.phase = "closed";
    connection.outbox.close();
    if (this.adopting === connection) {
      // It never became the holder; before anyone held the worker, its server going is a loss too.
      this.adopting = undefined;
      if (!this.everHeld) this.park();
    }
    if (this.holder !== connection) return;
    // The holder's connection closed: its server is gone, or let go.
    this.holder = undefined;
    this.park();
  }

  private say(connection: Connection, message: Record<string, unknown>): void {
    connection.outbox.write(encoder.encode(`${JSON.stringify(message)}\n`));
  }

  // -- parking ------------------------------------------------------------------------------------

  private park(): void {
    if (this.ending || this.holder || this.record.state === "parked") return;
    const now = Date.now();
    const expiresAt = now + this.keep.keep_seconds * 1000;
    this.record = {
      ...this.record,
      state: "parked",
      holder_pid: null,
      parked_since: now,
      expires_at: expiresAt,
    };
    this.trySave();
    // Requests the gone server never answered would keep their cell waiting for nothing.
    const answers = [...this.pendingRpc].map((id) => parkedAnswer(id));
    this.pendingRpc.clear();
    if (answers.length) this.toWorker(answers);
    this.armExpiry(expiresAt);
  }

  /** One timer, re-armed when the delay exceeds what a timer holds (about 24.8 days). */
  private armExpiry(at: number): void {
    this.cancelExpiry();
    const ms = Math.min(Math.max(0, at - Date.now()), 2 ** 31 - 1);
    this.expiry = setTimeout(() => {
      if (Date.now() >= at) void this.end(0);
      else this.armExpiry(at);
    }, ms);
  }

  private cancelExpiry(): void {
    clearTimeout(this.expiry);
    this.expiry = undefined;
  }

  /** Keeps a line for the next server, within the bound: older output goes first, results last. */
  private keepLine(bytes: Uint8Array, result: boolean): void {
    this.kept.push({ bytes, result });
    this.keptBytes += bytes.length;
    while (this.keptBytes > PARKED_FRAMES_MAX_BYTES && this.kept.length > 1) {
      let at = this.kept.findIndex((line) => !line.result);
      if (at < 0) at = 0;
      const [gone] = this.kept.splice(at, 1);
      this.keptBytes -= gone?.bytes.length ?? 0;
      this.dropped++;
    }
  }

  // -- the worker's side --------------------------------------------------------------------------

  private async relayStdout(): Promise<void> {
    const cutter = new LineCutter(FRAME_MAX_BYTES);
    try {
      for await (const chunk of this.child.stdout) {
        const forward: Uint8Array[] = [];
        for (const line of cutter.push(chunk as Uint8Array)) this.fromWorker(line, forward);
        if (forward.length === 0) continue;
        const holder = this.holder;
        if (holder) {
          holder.outbox.write(concat(forward));
          // The server reads slowly: the worker waits on its pipe rather than this process growing.
          if (holder.outbox.full) await holder.outbox.room();
        }
      }
    } catch {
      // An over-long line: the worker broke the protocol, and is ended below when it exits.
      this.tombstone ??= "the worker broke its frame protocol";
      this.child.kill("SIGKILL");
    }
  }

  /** One frame from the worker: followed, then forwarded to the holder, kept, or answered here. */
  private fromWorker(line: Uint8Array, forward: Uint8Array[]): void {
    if (!this.ready) {
      this.ready = line.slice(0, line.length - 1);
      try {
        const ready = JSON.parse(decodeLine(this.ready));
        this.record = { ...this.record, worker_pid: ready.pid, python_version: ready.python_version ?? null };
        this.trySave();
      } catch {}
      for (const wake of this.readyWaiters.splice(0)) wake();
      return;
    }
    const head = this.follow(line, "out");
    if (this.holder) {
      forward.push(line);
      return;
    }
    if (head?.type === "rpc" && head.id) {
      this.pendingRpc.delete(head.id);
      this.toWorker([parkedAnswer(head.id)]);
      return;
    }
    // A copy: the view would hold on to the whole chunk it was read in.
    this.keepLine(line.slice(), head?.type === "result");
  }

  private async relayStderr(): Promise<void> {
    try {
      for await (const chunk of this.child.stderr) {
        const line = encoder.encode(
          `${JSON.stringify({ guardian: "stderr", data: Buffer.from(chunk as Uint8Array).toString("base64") })}\n`,
        );
        if (this.holder) this.holder.outbox.write(line);
        else this.keepLine(line, false);
      }
    } catch {}
  }

  /** Notes what a frame means to the guardian: the running cell, bridge requests, job groups. */
  private follow(
    line: Uint8Array,
    direction: "in" | "out",
  ): { type: string; id: string | undefined } | undefined {
    // The first letter of the type tells most frames apart without decoding anything: output, display,
    // cancel and rpc_wait frames (the bulk of a chatty cell's) mean nothing to the guardian.
    const first = line[TYPE_AT];
    if (line[1] !== 0x22 || (first !== 0x65 && first !== 0x72 && first !== 0x6a)) return undefined;
    const text = ascii.decode(line.subarray(0, Math.min(line.length, 200)));
    const match = FRAME_HEAD.exec(text);
    if (!match) return undefined;
    const type = match[1] as string;
    const id = match[2] === "null" ? undefined : (JSON.parse(match[2] as string) as string);
    if (direction === "in") {
      if (
        type === "execute" &&
        id &&
        !INTERNAL_RUN.test(ascii.decode(line.subarray(Math.max(0, line.length - 24))))
      ) {
        this.running = {
          id,
          started_at: Date.now(),
          timeout_seconds: Number(EXECUTE_TIMEOUT.exec(text)?.[1] ?? 0),
        };
      } else if (type === "rpc_result" && id) this.pendingRpc.delete(id);
      return { type, id };
    }
    if (type === "rpc" && id) this.pendingRpc.add(id);
    else if (type === "rpc_cancel" && id) this.pendingRpc.delete(id);
    else if (type === "result" && this.running && id === this.running.id) {
      // Seen by a holder, the run is over; ended while parked, the next holder is told of it with its result.
      if (this.holder) this.running = undefined;
      else this.running = { ...this.running, ended_at: Date.now() };
    } else if (type === "job") this.trackJob(line);
    return { type, id };
  }

  private trackJob(line: Uint8Array): void {
    // A contained worker's pids are its sandbox's (docs/sandbox.md): never signalled from out here; its
    // groups end with its sandbox.
    if (this.record.containment !== undefined) return;
    try {
      const frame = JSON.parse(decodeLine(line)) as { pid?: unknown; action?: unknown };
      if (typeof frame.pid !== "number" || frame.pid <= 1) return;
      if (frame.action === "started") this.host.jobs.add(frame.pid);
      else this.host.jobs.delete(frame.pid);
    } catch {}
  }

  private toWorker(lines: Uint8Array[]): void {
    try {
      for (const line of lines) this.child.stdin.write(line);
      void Promise.resolve(this.child.stdin.flush()).catch(() => {});
    } catch {
      // The worker is gone; its exit is handled below.
    }
  }

  private async childExited(): Promise<void> {
    // Its last frames first: the holder (or the next one) gets everything the worker wrote.
    await this.stdoutDone;
    if (!this.ending && !this.holder && this.record.state === "parked") {
      const how = this.child.signalCode
        ? `was killed (${this.child.signalCode})`
        : `exited (status ${this.child.exitCode})`;
      this.tombstone ??= `its worker ${how} while parked`;
    }
    if (this.holder) await this.holder.outbox.flushed();
    this.host.emit({
      type: "exit",
      code: this.child.exitCode,
      signal: this.child.signalCode === null ? null : String(this.child.signalCode),
    });
    await this.host.finish(0);
  }

  // -- the record ---------------------------------------------------------------------------------

  private save(): void {
    writeRecord(this.dir, this.record);
  }

  /** After the start, a record that cannot be written is not worth ending the worker for. */
  private trySave(): void {
    try {
      this.save();
    } catch {}
  }
}

function parkedAnswer(id: string): Uint8Array {
  return encoder.encode(
    `${JSON.stringify({ type: "rpc_result", id, result: null, error: PARKED_RPC_ERROR, error_code: "SESSION_PARKED" })}\n`,
  );
}

async function exitsWithin(child: Child, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const exited = await Promise.race([child.exited.then(() => true), timeout]);
  clearTimeout(timer);
  return exited;
}

function startsWith(line: Uint8Array, prefix: string): boolean {
  if (line.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (line[i] !== prefix.charCodeAt(i)) return false;
  return true;
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array;
  return Buffer.concat(parts);
}

/**
 * Splits a byte stream into whole lines, each with its newline (a view of the chunk where it lies in
 * one), so a relayed line is written as it came. Throws past `maxBytes`.
 */
export class LineCutter {
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;

  constructor(private readonly maxBytes: number) {}

  push(chunk: Uint8Array): Uint8Array[] {
    const lines: Uint8Array[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start);
      if (nl === -1) break;
      const piece = chunk.subarray(start, nl + 1);
      if (this.pendingBytes + piece.length > this.maxBytes) throw new Error("line too long");
      if (this.pending.length === 0) {
        lines.push(piece);
      } else {
        this.pending.push(piece);
        lines.push(Buffer.concat(this.pending));
        this.pending = [];
        this.pendingBytes = 0;
      }
      start = nl + 1;
    }
    if (start < chunk.length) {
      this.pending.push(chunk.slice(start));
      this.pendingBytes += chunk.length - start;
      if (this.pendingBytes >= this.maxBytes) throw new Error("line too long");
    }
    return lines;
  }
}

/** Bytes toward one socket that it has not taken yet, written as it drains. */
class Outbox {
  private queue: Uint8Array[] = [];
  private bytes = 0;
  private waiters: (() => void)[] = [];

  constructor(private readonly socket: Socket<Connection>) {}

  get full(): boolean {
    return this.bytes > KEEPER_RELAY_BACKLOG_MAX_BYTES;
  }

  write(data: Uint8Array): void {
    if (this.closed) return;
    if (this.queue.length === 0) {
      const written = this.socket.write(data);
      if (written < 0) return;
      if (written === data.length) return;
      data = data.subarray(written);
    }
    this.queue.push(data);
    this.bytes += data.length;
  }

  drain(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0] as Uint8Array;
      const written = this.socket.write(head);
      if (written < 0) {
        this.queue = [];
        this.bytes = 0;
        break;
      }
      this.bytes -= Math.max(0, written);
      if (written < head.length) {
        this.queue[0] = head.subarray(Math.max(0, written));
        return;
      }
      this.queue.shift();
    }
    for (const wake of this.waiters.splice(0)) wake();
  }

  /** Resolves once the backlog is below the bound again (or the socket is gone). */
  room(): Promise<void> {
    if (!this.full || this.closed) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Resolves once everything queued was written (or the socket is gone). */
  async flushed(): Promise<void> {
    while (this.queue.length > 0 && !this.closed) {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private closed = false;

  /** The socket is gone: nothing more is written, and whoever waits for room goes on. */
  close(): void {
    this.closed = true;
    this.queue = [];
    this.bytes = 0;
    for (const wake of this.waiters.splice(0)) wake();
  }
}
