// What a kept contained worker's parked record carries about its sandbox (docs/sandbox.md, docs/sessions.md),
// in a module of its own: a server without --sandbox reads it to refuse such a worker, and must not load
// the sandbox runtime to do so.
import * as v from "valibot";

/** What a kept contained worker's parked record carries (the next server serves its network there). */
export const ContainedRecord = v.object({
  contained: v.literal(true),
  /** Its directory (its TMPDIR and proxy socket), removed by its guardian when it ends. */
  own: v.string(),
  /** The proxy socket its sandbox's relays dial. */
  socket: v.string(),
  policy: v.string(),
});
export type ContainedRecord = v.InferOutput<typeof ContainedRecord>;

/**
 * Why a server must not adopt a parked worker (docs/sessions.md): containment must match. A server
 * started with --sandbox contains every worker it serves, and one started without it cannot serve a
 * contained worker's network or speak for its policy; such a worker is ended and a fresh one started.
 */
export function adoptionRefusal(containment: unknown, contains: boolean): string | undefined {
  const contained = v.is(ContainedRecord, containment);
  if (contains && !contained) {
    return "the parked worker was not contained, and this server contains every worker (--sandbox)";
  }
  if (!contains && contained) {
    return "the parked worker was contained (--sandbox), and this server was started without --sandbox";
  }
  return undefined;
}
