// Kept sessions, as the session registry sees them (docs/sessions.md, "Keeping a session"): before a
// session is published, its key (project + name) is claimed for this server, a worker an earlier server
// parked under that key is adopted, and what could not come back is reported. A session that is not
// kept and finds nothing parked costs one directory listing.
import { describe, ReplError } from "../errors.ts";
import { ADOPT_HOLDER_GONE_WAIT_MS } from "../limits.ts";
import { log } from "../log.ts";
import { type Claim, claimKey } from "../parking/claim.ts";
import { formatDuration } from "../parking/duration.ts";
import { KeeperLink, KeeperRefused } from "../parking/link.ts";
import { forget, liveRecords } from "../parking/lookup.ts";
import {
  bootId,
  openParkingDirectory,
  parkingDirectory,
  parkingSecret,
  processAlive,
  sessionKey,
} from "../parking/place.ts";
import type { ParkedRecord } from "../parking/record.ts";
import { KeptWorker } from "../worker/kept.ts";
import type { KeepLaunch } from "../worker/process.ts";
import type { Lost, Session } from "./session.ts";

/**
 * The seam a contained session (the sandbox) uses: what its record carries to stay contained, and
 * whether a parked worker's containment lets this server adopt it. Unset, nothing is recorded and any
 * worker of the user's is adopted.
 */
export interface ParkingHooks {
  /** Recorded with a kept worker of this session (opaque JSON). */
  containment?: (session: { project: string; name: string }) => unknown;
  /**
   * Why this server must not adopt a worker parked with `containment` (e.g. a server started with
   * --sandbox meeting an uncontained worker), or undefined to adopt it. A refused worker is ended and
   * the session starts a fresh one, saying why.
   */
  refuseAdoption?: (containment: unknown) => string | undefined;
}

export interface KeepOptions {
  /** --keep-sessions: the default session's keep, and every opened session's unless it asks. */
  defaultSeconds: number;
  /** --keep-sessions-max. */
  maxSeconds: number;
  hooks?: ParkingHooks;
}

/** What one session's keeping came to, before it is published. */
export interface KeepOutcome {
  /** 0: not kept. */
  seconds: number;
  claim: Claim | undefined;
  /** A parked worker taken over, to hand to the supervisor. */
  worker?: KeptWorker;
  /** When that worker was parked (ms since the epoch). */
  parkedSince?: number | null;
  /** A worker parked under this name that could not come back: why, and the generation it had. */
  lost?: Lost;
}

export class Keeping {
  private place: { dir: string; secret: string } | undefined;

  constructor(readonly options: KeepOptions) {}

  /** The parking directory and secret, made on first need. */
  private placed(): { dir: string; secret: string } {
    if (!this.place) {
      const dir = openParkingDirectory();
      this.place = { dir, secret: parkingSecret(dir) };
    }
    return this.place;
  }

  /**
   * Claims `name` of `project` for a session kept `seconds` (undefined: the server's default, or what a
   * parked worker was kept for) and adopts what an earlier server parked under it. `interpreter` is
   * compared when the open named one. Throws SESSION_HELD when a live server holds that name.
   */
  async prepare(request: {
    project: string;
    name: string;
    sessionId: string;
    seconds: number | undefined;
    interpreter?: string;
  }): Promise<KeepOutcome> {
    const { project, name } = request;
    const key = sessionKey(project, name);
    const asked = request.seconds ?? this.options.defaultSeconds;
    const found = liveRecords(parkingDirectory(), key, { remove: false });
    if (asked === 0 && found.live.length === 0 && found.gone.length === 0)
      return { seconds: 0, claim: undefined };
    const { dir, secret } = this.placed();
    const claim = await this.claim(key, request.sessionId, `"${name}" of ${project}`);
    try {
      const outcome = await this.takeOver(dir, secret, key, request);
      const seconds = outcome.worker ? (request.seconds ?? outcome.keptSeconds ?? asked) : asked;
      if (seconds === 0 && !outcome.worker) {
        claim.release();
        return { seconds, claim: undefined, lost: outcome.lost };
      }
      return { seconds, claim, worker: outcome.worker, parkedSince: outcome.parkedSince, lost: outcome.lost };
    } catch (error) {
      claim.release();
      throw error;
    }
  }

  /** Claims `key` for a session (`what` names it in a refusal). Throws SESSION_HELD while a live server holds it. */
  async claim(key: string, sessionId: string, what: string): Promise<Claim> {
    const { dir } = this.placed();
    const claim = await claimWhenFree(dir, key, sessionId);
    if (!("key" in claim)) throw heldError(what, claim.holder, claim.sessionId);
    return claim;
  }

  /** With the claim held: the parked worker adopted, or why none could be. */
  private async takeOver(
    dir: string,
    secret: string,
    key: string,
    request: { project: string; name: string; interpreter?: string },
  ): Promise<{ worker?: KeptWorker; parkedSince?: number | null; keptSeconds?: number; lost?: Lost }> {
    const { live, gone } = liveRecords(dir, key, { remove: true });
    const mine = gone.find(({ record }) => sameSession(record, request));
    let lost: Lost | undefined = mine && { reason: mine.reason, generation: mine.record.generation };
    for (const record of live) {
      if (!sameSession(record, request)) continue;
      if (request.interpreter !== undefined && request.interpreter !== record.interpreter) {
        throw new ReplError(
          "INVALID_ARGUMENT",
          `A parked session "${request.name}" of this project runs ${record.interpreter}: open it without python ` +
            `to adopt it as it is, or end it first (repl-mcp sessions stop ${request.name})`,
        );
      }
      const refusal = this.options.hooks?.refuseAdoption?.(record.containment);
      if (refusal) {
        await endParked(record, secret);
        forget(dir, record);
        lost = { reason: refusal, generation: record.generation };
        continue;
      }
      try {
        const worker = await adoptWhenFree(record, secret);
        return { worker, parkedSince: worker.handover.parked_since, keptSeconds: record.keep_seconds };
      } catch (error) {
        if (!(error instanceof KeeperRefused)) throw error;
        if (error.code === "SESSION_HELD")
          throw heldError(`"${request.name}" of ${request.project}`, error.holder ?? 0, undefined);
        if (error.code === "WRONG_SECRET") {
          throw new ReplError(
            "SESSION_HELD",
            `The parked session "${request.name}" refused this server's parking secret (was ${dir}/secret replaced?); ` +
              `end its guardian (kill ${record.guardian_pid}) or open another name`,
          );
        }
        forget(dir, record);
        const reason =
          error.code === "GONE"
            ? "its guardian is gone (the worker ended while no server held it)"
            : `its guardian could not hand it over (${error.message})`;
        lost = { reason, generation: record.generation };
      }
    }
    return { lost };
  }

  /**
   * The default session is kept with --keep-sessions, and adopts what an earlier server of this
   * project parked as its default session, whatever this server's own flag says. Held by another
   * running server, it is simply not kept (each server has its default session).
   */
  async keepDefault(session: Session): Promise<void> {
    let outcome: KeepOutcome;
    try {
      outcome = await this.prepare({
        project: session.project,
        name: session.name,
        sessionId: session.id,
        seconds: undefined,
      });
    } catch (error) {
      const say = this.options.defaultSeconds > 0 ? log.warn : log.debug;
      say(`the default session is not kept: ${describe(error)}`);
      return;
    }
    if (session.closed) {
      await outcome.worker?.park();
      outcome.claim?.release();
      return;
    }
    this.apply(session, outcome);
    if (outcome.lost)
      log.warn(`the default session's kept worker could not come back: ${outcome.lost.reason}`);
    session.takeHandover();
  }

  /** What `prepare` came to, given to the session (its keep, the worker it adopts, what it lost). */
  apply(session: Session, outcome: KeepOutcome): void {
    const { seconds, claim } = outcome;
    if (claim) {
      session.keep = {
        seconds,
        claim,
        launch: () => (seconds > 0 ? this.launch(session, seconds) : undefined),
      };
    }
    if (outcome.worker) {
      session.handover = { worker: outcome.worker, info: outcome.worker.handoverInfo() };
      session.arrival = { adopted: { parkedSince: outcome.parkedSince ?? null } };
    } else if (outcome.lost) {
      session.arrival = { lost: outcome.lost };
      session.supervisor.resumeLost(outcome.lost.generation);
    }
  }

  /** What the supervisor's kept workers are started with (the session's key, keep and place). */
  launch(session: { project: string; name: string; python: string }, seconds: number): KeepLaunch {
    const { dir, secret } = this.placed();
    const containment = this.options.hooks?.containment?.(session);
    return {
      dir,
      key: sessionKey(session.project, session.name),
      secret,
      keep_seconds: seconds,
      boot_id: bootId(),
      project: session.project,
      name: session.name,
      interpreter: session.python,
      ...(containment === undefined ? {} : { containment }),
    };
  }
}

/** A record of another session with the same key (a hash collision) is not this one's. */
function sameSession(record: ParkedRecord, request: { project: string; name: string }): boolean {
  return record.project === request.project && record.name === request.name;
}

/**
 * Adopts through the guardian's socket. A guardian whose holder just died may not have seen it yet (its
 * lifeline's EOF is milliseconds away), so a "held" answer is asked again for a moment before it counts.
 */
async function adoptWhenFree(record: ParkedRecord, secret: string): Promise<KeptWorker> {
  const deadline = Date.now() + ADOPT_HOLDER_GONE_WAIT_MS;
  for (;;) {
    try {
      return await KeptWorker.adopt(record.socket, secret);
    } catch (error) {
      if (!(error instanceof KeeperRefused) || error.code !== "SESSION_HELD" || Date.now() >= deadline)
        throw error;
      await Bun.sleep(20);
    }
  }
}

/**
 * Claims the key; a holder that is no longer alive (killed a moment ago: the kernel drops its lock as
 * it goes) is given a moment, a live one is an answer at once.
 */
async function claimWhenFree(
  dir: string,
  key: string,
  sessionId: string,
): Promise<ReturnType<typeof claimKey>> {
  const deadline = Date.now() + ADOPT_HOLDER_GONE_WAIT_MS;
  for (;;) {
    const claim = claimKey(dir, key, sessionId);
    if ("key" in claim || processAlive(claim.holder) || Date.now() >= deadline) return claim;
    await Bun.sleep(20);
  }
}

/** Ends a parked worker for good through its guardian (no adoption). */
export async function endParked(record: ParkedRecord, secret: string, graceMs = 0): Promise<void> {
  try {
    const { link } = await KeeperLink.open(record.socket, secret, { end: graceMs });
    await link.closed;
  } catch (error) {
    log.debug(`ending a parked worker: ${(error as Error).message}`);
  }
}

function heldError(session: string, holder: number, sessionId: string | undefined): ReplError {
  const what = `The kept session ${session}`;
  if (holder === process.pid) {
    return new ReplError(
      "SESSION_HELD",
      `${what} is already open in this server${sessionId ? ` (session_id ${sessionId})` : ""}: use it, or open another name`,
    );
  }
  const by = holder > 0 ? `the repl-mcp server with pid ${holder}` : "another repl-mcp server";
  return new ReplError(
    "SESSION_HELD",
    `${what} is held by ${by}, which is still running: close it there (python_session_close), or open another name`,
  );
}

/** `keep` as sessions show it: how long, and until when if the server let go now. */
export function keepView(seconds: number): { duration: string; seconds: number; until: string } {
  return {
    duration: formatDuration(seconds),
    seconds,
    until: new Date(Date.now() + seconds * 1000).toISOString(),
  };
}
