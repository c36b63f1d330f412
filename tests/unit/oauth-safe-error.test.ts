// OAuth failures keep the server's error code and drop its words, and known secrets never survive.
import { expect, test } from "bun:test";
import { oauthFailure, redact } from "../../src/broker/oauth/safe-error.ts";

class FakeOAuthError extends Error {
  readonly errorCode = "invalid_grant";
}

test("an authorization server's description is replaced by its error code", () => {
  const error = oauthFailure(
    "OAuth token refresh failed",
    new FakeOAuthError("token rt-abc123 is revoked"),
    "log in",
  );
  expect(error.message).toBe(
    "OAuth token refresh failed: the authorization server answered invalid_grant; log in",
  );
  expect(error.code).toBe("CREDENTIALS_MISSING");
});

test("local failures keep their reason with every known secret blanked", () => {
  const error = oauthFailure(
    "OAuth code exchange failed",
    new Error("bad answer for s3cr3t-value"),
    "retry",
    ["s3cr3t-value", undefined],
  );
  expect(error.message).toBe("OAuth code exchange failed: bad answer for [redacted]; retry");
  expect(redact("a b", ["ab"])).toBe("a b");
});
