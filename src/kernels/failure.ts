// What went wrong talking to a kernel server, as an error an agent can act on (KERNEL_SERVER_FAILED):
// which server, what we were doing, what it answered, what to check. Never the token.
import { describe, ReplError } from "../errors.ts";
import type { KernelServer } from "./config.ts";

/** The HTTP status a failed request answered with, when it got that far. */
export function statusOf(error: unknown): number | undefined {
  const response = (error as { response?: { status?: unknown } } | undefined)?.response;
  return typeof response?.status === "number" ? response.status : undefined;
}

/** The failure of one request to a kernel server, while `doing` something. */
export function serverFailure(server: KernelServer, doing: string, error: unknown): ReplError {
  if (error instanceof ReplError) return error;
  const where = `Kernel server "${server.name}" (${server.url})`;
  const status = statusOf(error);
  const fail = (message: string) => new ReplError("KERNEL_SERVER_FAILED", message, { cause: error });
  if (status === 401 || status === 403) {
    return fail(
      `${where} refused the token while ${doing} (HTTP ${status}); check the entry's token or tokenFile`,
    );
  }
  if (status !== undefined && status >= 300 && status < 400) {
    return fail(
      `${where} redirected while ${doing} (HTTP ${status}), as to a login page; check the token and that the url is the user server (…/user/<name>/)`,
    );
  }
  if (status === 404) {
    return fail(`${where} answered 404 while ${doing}; check that the url is a Jupyter server's base URL`);
  }
  if (status !== undefined) {
    return fail(`${where} failed while ${doing} (HTTP ${status}: ${describe(error).slice(0, 300)})`);
  }
  const name = (error as { name?: unknown } | undefined)?.name;
  if (name === "TimeoutError" || name === "AbortError" || /timed out/i.test(describe(error))) {
    return fail(
      `${where} did not answer in time while ${doing}; check that it runs, or raise startTimeoutS for slow kernel starts`,
    );
  }
  if (error instanceof SyntaxError || /validation|JSON/i.test(describe(error))) {
    return fail(`${where} answered something that is not the Jupyter API while ${doing}; check the url`);
  }
  return fail(
    `${where} could not be reached while ${doing} (${describe(error).slice(0, 300)}); check that it runs and the url`,
  );
}
