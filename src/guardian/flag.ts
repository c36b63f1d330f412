/** The hidden argument that turns the binary into a guardian; it is never shown in --help. */
export const GUARDIAN_FLAG = "--internal-guardian";
