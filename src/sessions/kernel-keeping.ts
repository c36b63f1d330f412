// Kept kernel sessions (docs/kernels.md, "Keeping a kernel session"): an owned kernel is left running
// when the server exits and re-attached by name when the next server opens the same session on the same
// kernel server. There is no guardian: the kernel lives on its Jupyter server, and the record says which
// one it is. A kept kernel whose keep ran out is shut down by the next server started with that kernel
// server configured.
import { describe, ReplError } from "../errors.ts";
import type { KernelServer } from "../kernels/config.ts";
import type { KernelSeat, SeatRequest } from "../kernels/seat.ts";
import { log } from "../log.ts";
import type { Claim } from "../parking/claim.ts";
import {
  type KernelRecord,
  kernelSessionKey,
  listKernelRecords,
  readKernelRecord,
  removeKernelRecord,
  writeKernelRecord,
} from "../parking/kernel-record.ts";
import { parkingDirectory, processAlive } from "../parking/place.ts";
import type { Keeping } from "./keeping.ts";
import type { Lost, Session } from "./session.ts";

export interface KernelKeep {
  /** 0: not kept. */
  seconds: number;
  claim: Claim | undefined;
  key: string;
  /** The project on the kernel's host as the open named it. */
  project: string | undefined;
  /** A kernel a kept session of this name left running, to re-attach. */
  adopt?: { kernelId: string; generation: number; parkedSince: number | null };
  /** A kernel whose keep ran out: shut it down before anything else. */
  expired?: string;
  lost?: Lost;
}

/**
 * Claims the session's name on `server` and finds what a kept session of that name left. Throws
 * SESSION_HELD when a live server holds it.
 */
export async function prepareKernelKeep(
  keeping: Keeping,
  request: {
    server: KernelServer;
    project: string | undefined;
    name: string;
    sessionId: string;
    seconds: number | undefined;
  },
): Promise<KernelKeep> {
  const key = kernelSessionKey(request.server.name, request.project, request.name);
  const asked = request.seconds ?? keeping.options.defaultSeconds;
  const found = readKernelRecord(parkingDirectory(), key);
  if (asked === 0 && !found) return { seconds: 0, claim: undefined, key, project: request.project };
  const claim = await keeping.claim(key, request.sessionId, `${request.name} on "${request.server.name}"`);
  const record = readKernelRecord(parkingDirectory(), key);
  const outcome: KernelKeep = { seconds: asked, claim, key, project: request.project };
  if (record && record.url !== request.server.url) {
    outcome.lost = {
      reason: `its kernel server's url changed (it was ${record.url})`,
      generation: record.generation,
    };
  } else if (record?.state === "parked" && record.expires_at !== null && record.expires_at < Date.now()) {
    outcome.expired = record.kernel_id;
    outcome.lost = {
      reason: "its keep ran out while it was parked (its kernel is shut down)",
      generation: record.generation,
    };
  } else if (record) {
    outcome.adopt = {
      kernelId: record.kernel_id,
      generation: record.generation,
      parkedSince: record.state === "parked" ? record.parked_since : null,
    };
    outcome.seconds = request.seconds ?? record.keep_seconds;
  }
  if (record) removeKernelRecord(parkingDirectory(), key);
  if (outcome.seconds === 0 && !outcome.adopt) {
    claim.release();
    outcome.claim = undefined;
  }
  return outcome;
}

/** Writes a kept kernel session's record: held by this server, or parked (`generation` then final). */
export function recordKernel(
  fields: Omit<KernelRecord, "version" | "kind" | "state" | "holder_pid" | "parked_since" | "expires_at">,
  parked: boolean,
): void {
  const now = Date.now();
  try {
    writeKernelRecord(parkingDirectory(), {
      version: 1,
      kind: "kernel",
      ...fields,
      state: parked ? "parked" : "held",
      holder_pid: parked ? null : process.pid,
      parked_since: parked ? now : null,
      expires_at: parked ? now + fields.keep_seconds * 1000 : null,
    });
  } catch (error) {
    log.warn(`the kept kernel session ${fields.name} could not be recorded: ${describe(error)}`);
  }
}

/**
 * Kept kernels on the servers given whose keep ran out are shut down (`shutdown`) and forgotten; one a
 * server held when it died counts as parked from now. Returns how many were shut down.
 */
export async function collectExpiredKernels(
  servers: readonly KernelServer[],
  shutdown: (server: KernelServer, id: string) => Promise<void>,
): Promise<number> {
  const dir = parkingDirectory();
  let stopped = 0;
  for (const record of listKernelRecords(dir)) {
    const server = servers.find(
      (candidate) => candidate.name === record.server && candidate.url === record.url,
    );
    if (!server) continue;
    if (record.state === "held") {
      if (record.holder_pid !== null && !processAlive(record.holder_pid)) {
        const {
          state: _,
          holder_pid: __,
          parked_since: ___,
          expires_at: ____,
          version: _v,
          kind: _k,
          ...fields
        } = record;
        recordKernel(fields, true);
      }
      continue;
    }
    if (record.expires_at === null || record.expires_at >= Date.now()) continue;
    try {
      await shutdown(server, record.kernel_id);
      stopped++;
    } catch (error) {
      log.warn(`a kept kernel on "${server.name}" whose keep ran out was not shut down: ${describe(error)}`);
    }
    removeKernelRecord(dir, record.key);
  }
  return stopped;
}

/**
 * The session's kernel: the one a kept session of its name left running (re-attached, and owned again),
 * else a new (or the chosen) one. A kept kernel that is gone is reported in `kept.lost`.
 */
export async function kernelSeat(request: SeatRequest, kept: KernelKeep | undefined): Promise<KernelSeat> {
  const { KernelSeat } = await import("../kernels/seat.ts");
  if (kept?.expired) {
    await request.link
      .shutdown(kept.expired)
      .catch((error) => log.warn(`shutting down a kept kernel whose keep ran out: ${describe(error)}`));
  }
  const adopt = kept?.adopt;
  if (kept && adopt) {
    try {
      return await KernelSeat.open({ ...request, kernelId: adopt.kernelId, adopt: true });
    } catch (error) {
      if (!(error instanceof ReplError) || error.code !== "KERNEL_NOT_FOUND") throw error;
      kept.adopt = undefined;
      kept.lost = {
        reason: `its kernel is gone from "${request.server.name}"`,
        generation: adopt.generation,
      };
    }
  }
  return await KernelSeat.open(request);
}

/** A kept kernel session: recorded (held by this server), and the life of its re-attached kernel taken over. */
export async function keepKernelSession(session: Session, seat: KernelSeat, kept: KernelKeep): Promise<void> {
  const adopt = kept.adopt;
  if (adopt) {
    session.arrival = { adopted: { parkedSince: adopt.parkedSince } };
    if (adopt.generation > 0) {
      const life = await seat.startLife();
      session.handover = { worker: life, info: { generation: adopt.generation } };
    }
  } else if (kept.lost) {
    session.arrival = { lost: kept.lost };
    session.supervisor.resumeLost(kept.lost.generation);
  }
  const { seconds, claim, key } = kept;
  if (!claim) return;
  let kernelId = seat.kernelId;
  const startedAt = Date.now();
  const record = (parked: boolean) =>
    recordKernel(
      {
        key,
        server: seat.server.name,
        url: seat.server.url,
        project: kept.project ?? "",
        name: session.name,
        kernel_id: kernelId,
        generation: session.supervisor.generation,
        keep_seconds: seconds,
        started_at: startedAt,
      },
      parked,
    );
  session.keep = {
    seconds,
    claim,
    launch: () => undefined,
    parked: () => record(true),
    ended: () => removeKernelRecord(parkingDirectory(), key),
  };
  if (seconds > 0) {
    seat.keep((id) => {
      kernelId = id;
      record(false);
    });
  }
}
