# The part of installing a repl-mcp release that release/install.sh and the Claude Code plugin's
# launcher share: which asset this machine needs, downloading it with SHA256SUMS, checking the SHA-256,
# unpacking it and putting the binary in place with one atomic rename.
#
# It is POSIX sh, sourced by the launcher beside it. install.sh sources it from a checkout, and the
# release build (release/release.ts) writes it into the published install.sh in place of that line, so
# `curl ... | sh` gets one file. It only defines variables and functions; the caller defines
#   die MESSAGE   print one line on stderr and exit 1
#   note MESSAGE  tell the user something (the launcher must keep stdout for MCP)
# and calls release_traps first, so every exit path removes what was half done.

# The GitHub repository that publishes the releases ("owner/name"); change it here for a fork.
REPO="repl-mcp/repl-mcp"
GITHUB="https://github.com"

NAME="repl-mcp"

# --- temporary files: removed on every exit path ---------------------------------------------------

tmp_dir=""
staged=""

release_cleanup() {
  if [ -n "$staged" ]; then rm -f "$staged"; fi
  if [ -n "$tmp_dir" ]; then rm -rf "$tmp_dir"; fi
  staged=""
  tmp_dir=""
}

release_traps() {
  trap release_cleanup EXIT
  # An 'exit' inside a signal trap runs the EXIT trap too, so cleanup happens exactly once.
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# Before an exec: nothing may be left to clean up, and the traps would not run anyway.
release_untrap() {
  release_cleanup
  trap - EXIT HUP INT TERM
}

# --- platform --------------------------------------------------------------------------------------

# release_platform: sets os, arch and asset (the archive this machine needs).
release_platform() {
  uname_s="${REPL_MCP_OS:-$(uname -s)}"
  uname_m="${REPL_MCP_ARCH:-$(uname -m)}"

  case "$uname_s" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    *) die "unsupported operating system: $uname_s (release binaries exist for Linux and macOS)" ;;
  esac

  case "$uname_m" in
    x86_64 | amd64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) die "unsupported architecture: $uname_m (release binaries exist for x86_64 and arm64)" ;;
  esac

  # A shell running under Rosetta 2 reports x86_64 on Apple silicon; use the native build instead.
  if [ "$os" = darwin ] && [ "$arch" = x64 ]; then
    if [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || true)" = 1 ]; then
      arch=arm64
      note "Rosetta 2 detected: installing the native arm64 build."
    fi
  fi

  asset="$NAME-$os-$arch.tar.gz"
}

# release_base_url VERSION: prints where the assets of that release are (empty or "latest": the newest).
release_base_url() {
  if [ -z "$1" ] || [ "$1" = latest ]; then
    printf '%s\n' "$GITHUB/$REPO/releases/latest/download"
  else
    printf '%s\n' "$GITHUB/$REPO/releases/download/v${1#v}"
  fi
}

# release_version_ok VERSION: whether VERSION is safe to put into a URL.
release_version_ok() {
  case "$1" in
    *[!A-Za-z0-9.+-]*) return 1 ;;
  esac
  return 0
}

# --- tools -----------------------------------------------------------------------------------------

have() {
  command -v "$1" >/dev/null 2>&1
}

# release_tools: picks a downloader and a SHA-256 tool, and checks the rest is there.
release_tools() {
  if have curl; then
    downloader=curl
  elif have wget; then
    downloader=wget
  else
    die "neither curl nor wget is installed; install one of them and retry"
  fi

  if have sha256sum; then
    hasher=sha256sum
  elif have shasum; then
    hasher=shasum
  elif have openssl; then
    hasher=openssl
  else
    die "no SHA-256 tool found (need sha256sum, shasum or openssl)"
  fi

  for tool in tar gzip mktemp; do
    if ! have "$tool"; then die "$tool is required but was not found"; fi
  done
}

# download URL FILE: fetch URL into FILE or stop with a one-line reason.
download() {
  if [ "$downloader" = curl ]; then
    if status=$(curl --silent --location --retry 2 --output "$2" --write-out '%{http_code}' "$1"); then
      case "$status" in
        2??) return 0 ;;
        *) die "download failed (HTTP $status): $1" ;;
      esac
    else
      die "download failed (curl exit code $?): $1"
    fi
  else
    if ! wget --quiet --output-document="$2" "$1"; then
      die "download failed (wget could not fetch it; HTTP error or network problem): $1"
    fi
  fi
}

# sha256_of FILE: print the lowercase hex SHA-256 of FILE.
sha256_of() {
  case "$hasher" in
    sha256sum) sha256sum "$1" ;;
    shasum) shasum -a 256 "$1" ;;
    openssl) openssl dgst -sha256 -r "$1" ;;
  esac | awk '{ print tolower($1); exit }'
}

# --- download and verify ---------------------------------------------------------------------------

# release_fetch BASE_URL: downloads SHA256SUMS and $asset from BASE_URL into a new temporary directory,
# verifies the checksum and unpacks the binary; leaves its path in $unpacked.
release_fetch() {
  tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/$NAME-install.XXXXXX") || die "cannot create a temporary directory"

  download "$1/SHA256SUMS" "$tmp_dir/SHA256SUMS"

  # Lines look like "<hex>  <file>" (or "<hex> *<file>" in binary mode).
  expected=$(awk -v f="$asset" '$2 == f || $2 == "*" f { print tolower($1) }' "$tmp_dir/SHA256SUMS")
  case "$expected" in
    "") die "SHA256SUMS has no checksum for $asset; refusing to install" ;;
    *[!0-9a-f]*) die "SHA256SUMS has a malformed or duplicate entry for $asset; refusing to install" ;;
  esac
  if [ "${#expected}" -ne 64 ]; then die "SHA256SUMS has a malformed entry for $asset; refusing to install"; fi

  download "$1/$asset" "$tmp_dir/$asset"
  actual=$(sha256_of "$tmp_dir/$asset")
  if [ "$actual" != "$expected" ]; then
    die "checksum mismatch for $asset (expected $expected, got $actual); nothing was installed"
  fi

  mkdir "$tmp_dir/unpacked"
  if ! tar -xzf "$tmp_dir/$asset" -C "$tmp_dir/unpacked" "$NAME" 2>/dev/null; then
    die "could not extract $NAME from $asset"
  fi
  unpacked="$tmp_dir/unpacked/$NAME"
  if [ ! -f "$unpacked" ]; then die "$asset does not contain a $NAME binary"; fi
}

# --- install atomically ----------------------------------------------------------------------------

# release_install FILE DIR: makes FILE DIR/repl-mcp with one rename, after checking it runs here; leaves
# the absolute path in $target. DIR is created if missing.
release_install() {
  mkdir -p "$2" 2>/dev/null || die "cannot create install directory $2"
  install_dir=$(CDPATH='' cd -- "$2" && pwd) || die "cannot enter install directory $2"
  target="$install_dir/$NAME"
  if [ -d "$target" ]; then die "$target is a directory; remove it or choose another directory"; fi

  # Stage the new binary next to the old one, so the final rename is atomic: anyone running or reading
  # the installed path sees either the old file or the complete new one, never a partial write.
  staged=$(mktemp "$install_dir/.$NAME.install.XXXXXX" 2>/dev/null) || die "cannot write to $install_dir"
  cp "$1" "$staged" || die "cannot write to $install_dir"
  chmod 755 "$staged" || die "cannot make $staged executable"

  # Make sure the new binary runs here before it replaces anything.
  if ! "$staged" --version >/dev/null 2>&1; then
    die "the downloaded $NAME does not run here ($os-$arch, from $install_dir); nothing was installed"
  fi

  mv -f "$staged" "$target" || die "cannot replace $target"
  staged=""
}
