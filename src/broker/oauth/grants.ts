// Where a connection's bearer token comes from. An authorization-code entry reads its credential file
// and refreshes the token (refresh_token grant, under the file's lock, the rotated refresh token saved
// atomically) when it is within 60 s of expiry; a client_credentials entry asks the authorization
// server at connect and again near expiry. Tokens stay in memory and in that one file, nowhere else.

import { statSync } from "node:fs";
import {
  type AuthorizationServerMetadata,
  auth,
  type OAuthClientInformationContext,
  type OAuthClientProvider,
  type OAuthTokens,
  refreshAuthorization,
} from "@modelcontextprotocol/client";
import { ReplError } from "../../errors.ts";
import { lockExclusive, lockPathFor } from "../../fs/lock.ts";
import { OAUTH_REFRESH_LOCK_WAIT_MS, OAUTH_REFRESH_MARGIN_SECONDS } from "../../limits.ts";
import { NAME, VERSION } from "../../version.ts";
import type { HttpEntry } from "../config.ts";
import { type Challenge, wellKnownMetadata } from "./challenge.ts";
import {
  type CredentialFile,
  needsRefresh,
  OAUTH_GRANT_REQUIRED,
  readCredentialFile,
  writeCredentialFile,
} from "./credential-file.ts";
import { oauthFetch, type TokenCapture } from "./oauth-fetch.ts";
import { resourceFor } from "./resource.ts";
import { oauthFailure } from "./safe-error.ts";

export interface TokenSource {
  /**
   * A bearer token valid for at least the refresh margin; throws an actionable ReplError otherwise.
   * Undefined while nothing says where to ask for one yet (see challenge.ts): the request then goes
   * without, and its 401 says where.
   */
  accessToken(): Promise<string | undefined>;
  /**
   * A new token after the peer refused `refused` (401: revoked, expired early, or none was sent): a
   * refresh (or a new client_credentials request), unless another caller already replaced it. `heard`
   * is what that 401 named.
   */
  renewAfterRefusal(refused: string | undefined, heard: Challenge): Promise<string>;
  /** What the user does when even a renewed token is refused. */
  readonly remedy: string;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);
const LOGIN_AGAIN = "run repl-mcp --config REGISTRY --oauth-login SERVER again";

/** Calls that arrive together share one refresh or token request. */
abstract class SharedTokenSource implements TokenSource {
  private pending: Promise<string | undefined> | undefined;
  abstract readonly remedy: string;
  protected abstract current(): string | undefined;
  /**
   * `refused`: the token a peer just refused, which must not be handed out again; `heard`: what its
   * 401 named. Undefined only without `heard`, while nothing says where to ask.
   */
  protected abstract renew(refused?: string, heard?: Challenge): Promise<string | undefined>;
  accessToken(): Promise<string | undefined> {
    const token = this.current();
    if (token) return Promise.resolve(token);
    return this.shared();
  }
  async renewAfterRefusal(refused: string | undefined, heard: Challenge): Promise<string> {
    const token = this.current();
    if (token && token !== refused) return token;
    // A lookup that started before this 401 may have ended empty-handed: ask again with what it named.
    const renewed = (await this.shared(refused, heard)) ?? (await this.shared(refused, heard));
    if (renewed === undefined) throw new ReplError("CREDENTIALS_MISSING", `No OAuth token; ${this.remedy}`);
    return renewed;
  }
  private shared(refused?: string, heard?: Challenge): Promise<string | undefined> {
    this.pending ??= this.renew(refused, heard).finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }
}

export class StoredGrant extends SharedTokenSource {
  readonly remedy = LOGIN_AGAIN;
  private file: CredentialFile | undefined;
  /** Identity of the file version `file` came from: a new login or an edit makes it read again. */
  private version = "";

  constructor(
    private readonly path: string,
    private readonly serverUrl: string,
  ) {
    super();
  }

  private stamp(): string {
    try {
      const stat = statSync(this.path);
      return `${stat.ino}:${stat.mtimeMs}:${stat.size}`;
    } catch {
      return "";
    }
  }

  protected current(): string | undefined {
    if (!this.file || needsRefresh(this.file) || this.stamp() !== this.version) return undefined;
    return this.file.token_response.access_token;
  }

  /** Reads the file; the version is taken first, so a write racing the read is noticed next time. */
  private read(): CredentialFile {
    this.version = this.stamp();
    const file = readCredentialFile(this.path, this.serverUrl);
    if (!file) throw new ReplError("CREDENTIALS_MISSING", OAUTH_GRANT_REQUIRED);
    return file;
  }

  protected async renew(refused?: string): Promise<string> {
    let file = this.read();
    const stale = (candidate: CredentialFile) =>
      needsRefresh(candidate) || candidate.token_response.access_token === refused;
    if (stale(file)) {
      if (!file.token_response.refresh_token) {
        const what = refused === undefined ? "has expired" : "was refused by the server";
        throw new ReplError(
          "CREDENTIALS_MISSING",
          `The stored OAuth access token ${what} and has no refresh token; ${LOGIN_AGAIN}`,
        );
      }
      const lock = await lockExclusive(
        lockPathFor(this.path),
        "OAuth credential file",
        OAUTH_REFRESH_LOCK_WAIT_MS,
      );
      if (!lock) {
        throw new ReplError(
          "CREDENTIALS_MISSING",
          "Another process kept the OAuth credential file locked; try mcp.refresh() in a moment",
        );
      }
      try {
        // Another server may have refreshed while we waited; its rotated token is the one to use.
        file = this.read();
        if (stale(file)) {
          file = await this.refresh(file);
          this.version = this.stamp();
        }
      } finally {
        lock.release();
      }
    }
    this.file = file;
    return file.token_response.access_token;
  }

  private async refresh(file: CredentialFile): Promise<CredentialFile> {
    const capture: TokenCapture = {};
    const client = file.client;
    const refreshToken = file.token_response.refresh_token as string;
    // The token endpoint was recorded at login, so a refresh needs no discovery round trip.
    const metadata = {
      issuer: client.issuer,
      authorization_endpoint: client.token_endpoint,
      token_endpoint: client.token_endpoint,
      response_types_supported: ["code"],
    } as AuthorizationServerMetadata;
    let tokens: OAuthTokens;
    try {
      tokens = await refreshAuthorization(client.issuer, {
        metadata,
        clientInformation: {
          client_id: client.client_id,
          ...(client.client_secret ? { client_secret: client.client_secret } : {}),
          ...(client.token_endpoint_auth_method
            ? { token_endpoint_auth_method: client.token_endpoint_auth_method }
            : {}),
        },
        refreshToken,
        resource: new URL(this.serverUrl),
        fetchFn: oauthFetch(capture),
      });
    } catch (error) {
      throw oauthFailure("OAuth token refresh failed", error, LOGIN_AGAIN, [
        refreshToken,
        client.client_secret,
        file.token_response.access_token,
      ]);
    }
    // Saved as received; a server that does not rotate leaves the old refresh token in force.
    const response = { ...(capture.response ?? tokens) } as CredentialFile["token_response"];
    response.refresh_token ??= refreshToken;
    const next = { ...file, token_received_at: capture.receivedAt ?? nowSeconds(), token_response: response };
    await writeCredentialFile(this.path, next);
    return next;
  }
}

/** The SDK's non-interactive flow: discovery, then a client_credentials token request. */
class ClientCredentialsProvider implements OAuthClientProvider {
  received: OAuthTokens | undefined;
  readonly redirectUrl = undefined;
  readonly validateResourceURL: (serverUrl: string | URL, resource?: string) => Promise<URL>;

  constructor(
    private readonly spec: HttpEntry,
    private readonly scope: string | undefined,
  ) {
    this.validateResourceURL = resourceFor(spec.url);
  }
  get clientMetadata() {
    const scope = this.scope;
    return {
      client_name: `${NAME} broker`,
      software_id: NAME,
      software_version: VERSION,
      redirect_uris: [],
      grant_types: ["client_credentials"],
      ...(scope ? { scope } : {}),
    };
  }
  // Configured for this entry, so it belongs to whichever authorization server its discovery finds.
  clientInformation(ctx?: OAuthClientInformationContext) {
    return {
      client_id: this.spec.oauth?.clientId as string,
      client_secret: this.spec.oauth?.clientSecret as string,
      ...(ctx ? { issuer: ctx.issuer } : {}),
    };
  }
  tokens() {
    return undefined;
  }
  saveTokens(tokens: OAuthTokens) {
    this.received = tokens;
  }
  prepareTokenRequest(scope?: string) {
    return new URLSearchParams({ grant_type: "client_credentials", ...(scope ? { scope } : {}) });
  }
  redirectToAuthorization(): never {
    throw new ReplError("CREDENTIALS_MISSING", "A client_credentials grant cannot open a browser");
  }
  saveCodeVerifier() {}
  codeVerifier(): never {
    throw new ReplError("CREDENTIALS_MISSING", "A client_credentials grant has no PKCE verifier");
  }
}

export class ClientCredentialsGrant extends SharedTokenSource {
  readonly remedy = "check oauth.clientId, oauth.clientSecret and scopes, then mcp.refresh()";
  private token: string | undefined;
  private expiresAt = 0;
  /** Where the protected-resource metadata is, once a well-known URL or a 401 said it; kept for renewals. */
  private hint: Challenge | undefined;
  private lookedUp = false;

  constructor(private readonly spec: HttpEntry) {
    super();
  }

  protected current(): string | undefined {
    return this.token && this.expiresAt - nowSeconds() > OAUTH_REFRESH_MARGIN_SECONDS
      ? this.token
      : undefined;
  }

  protected async renew(_refused?: string, heard?: Challenge): Promise<string | undefined> {
    const fetchFn = oauthFetch();
    if (heard?.resourceMetadataUrl) this.hint = heard;
    if (!this.hint && !this.lookedUp) {
      this.lookedUp = true;
      const metadata = await wellKnownMetadata(this.spec.url, fetchFn);
      if (metadata) this.hint = { resourceMetadataUrl: metadata };
    }
    if (!this.hint && !heard) return undefined;
    const hint = { ...heard, ...this.hint, scope: heard?.scope ?? this.hint?.scope };
    const scopes = this.spec.oauth?.scopes ?? [];
    const provider = new ClientCredentialsProvider(this.spec, scopes.length ? scopes.join(" ") : hint.scope);
    try {
      await auth(provider, {
        serverUrl: this.spec.url,
        resourceMetadataUrl: hint.resourceMetadataUrl,
        fetchFn,
      });
    } catch (error) {
      throw oauthFailure("OAuth client_credentials grant failed", error, this.remedy, [
        this.spec.oauth?.clientSecret,
        this.spec.oauth?.clientId,
      ]);
    }
    const tokens = provider.received as OAuthTokens;
    this.token = tokens.access_token;
    this.expiresAt =
      tokens.expires_in === undefined ? Number.POSITIVE_INFINITY : nowSeconds() + tokens.expires_in;
    return this.token;
  }
}

export function tokenSource(spec: HttpEntry): TokenSource | undefined {
  const oauth = spec.oauth;
  if (!oauth) return undefined;
  if ((oauth.grantType ?? "authorization_code") === "client_credentials")
    return new ClientCredentialsGrant(spec);
  return new StoredGrant(oauth.credentialFile as string, spec.url);
}
