// The record of a kept kernel session (docs/kernels.md, "Keeping a kernel session"): the kernel it
// owns on a kernel server, left running when its server exits and re-attached by the next server that
// opens the same name there. No guardian runs for it (the kernel lives on its Jupyter server): the
// record is written by the server that holds it, and a kernel whose keep ran out is shut down by the
// next server started with that kernel server configured. Never a token: the server's name and url.
import { readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { writePrivateFileAtomic } from "../fs/atomic.ts";
import { readPrivateFile } from "../fs/private-file.ts";
import { PARKING_RECORD_MAX_BYTES } from "../limits.ts";
import { sessionKey } from "./place.ts";

export const KernelRecord = v.object({
  version: v.literal(1),
  kind: v.literal("kernel"),
  key: v.pipe(v.string(), v.regex(/^[0-9a-f]{16}$/)),
  /** The kernel server's name in the kernels file, and its url (both must match to re-attach). */
  server: v.string(),
  url: v.string(),
  /** The project on the kernel's host as the open named it ("" for the kernel's own directory). */
  project: v.string(),
  name: v.string(),
  kernel_id: v.string(),
  generation: v.pipe(v.number(), v.integer(), v.minValue(0)),
  keep_seconds: v.pipe(v.number(), v.integer(), v.minValue(1)),
  state: v.picklist(["held", "parked"]),
  holder_pid: v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1))),
  started_at: v.number(),
  parked_since: v.nullable(v.number()),
  expires_at: v.nullable(v.number()),
});
export type KernelRecord = v.InferOutput<typeof KernelRecord>;

const SUFFIX = "-kernel.json";

/** A kernel session's key: its kernel server, its project there and its name. */
export function kernelSessionKey(server: string, project: string | undefined, name: string): string {
  return sessionKey(`kernel:${server}:${project ?? ""}`, name);
}

function pathOf(dir: string, key: string): string {
  return join(dir, `${key}${SUFFIX}`);
}

export function writeKernelRecord(dir: string, record: KernelRecord): void {
  writePrivateFileAtomic(pathOf(dir, record.key), `${JSON.stringify(record)}\n`);
}

export function readKernelRecord(dir: string, key: string): KernelRecord | undefined {
  try {
    const text = readPrivateFile(pathOf(dir, key), "A kept kernel's record", PARKING_RECORD_MAX_BYTES);
    if (text === null) return undefined;
    const parsed = v.safeParse(KernelRecord, JSON.parse(text));
    return parsed.success ? parsed.output : undefined;
  } catch {
    return undefined;
  }
}

export function removeKernelRecord(dir: string, key: string): void {
  try {
    unlinkSync(pathOf(dir, key));
  } catch {}
}

export function listKernelRecords(dir: string): KernelRecord[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((name) => name.endsWith(SUFFIX))
    .map((name) => readKernelRecord(dir, name.slice(0, -SUFFIX.length)))
    .filter((record): record is KernelRecord => record !== undefined);
}
