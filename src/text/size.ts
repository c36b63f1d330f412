// Sizes in messages, written from the limit constants so a message never states a stale number.

const KIB = 1024;
const MIB = 1024 * KIB;

/** 1048576 → "1 MiB", 262144 → "256 KiB", 900000 → "900000 bytes". */
export function sizeText(bytes: number): string {
  if (bytes >= MIB && bytes % MIB === 0) return `${bytes / MIB} MiB`;
  if (bytes >= KIB && bytes % KIB === 0) return `${bytes / KIB} KiB`;
  return `${bytes} bytes`;
}
