#!/bin/sh
# Installs the repl-mcp release binary for this machine, without root:
#
#   curl -fsSL https://github.com/repl-mcp/repl-mcp/releases/latest/download/install.sh | sh
#   sh install.sh --version 0.1.0 --dir ~/bin
#
# It downloads repl-mcp-<os>-<arch>.tar.gz and SHA256SUMS from the GitHub release, verifies the
# archive's SHA-256 before touching anything, and atomically replaces <dir>/repl-mcp. Run with
# --help for the options and environment variables.
set -eu

# The GitHub repository that publishes the releases ("owner/name"); change it here for a fork.
REPO="repl-mcp/repl-mcp"
GITHUB="https://github.com"

NAME="repl-mcp"

usage() {
  cat <<EOF
Install the $NAME MCP server binary.

Usage: install.sh [--version VERSION] [--dir DIR] [--base-url URL]

Options:
  --version VERSION  release to install, e.g. 0.1.0 (default: the latest release)
  --dir DIR          directory to install into (default: \$HOME/.local/bin)
  --base-url URL     fetch <URL>/<asset> instead of the GitHub release (mirrors,
                     testing); --version is then ignored
  -h, --help         show this help

Environment (flags take precedence):
  REPL_MCP_VERSION      same as --version
  REPL_MCP_INSTALL_DIR  same as --dir
  REPL_MCP_BASE_URL     same as --base-url
  REPL_MCP_OS           test hook: used instead of the output of 'uname -s'
  REPL_MCP_ARCH         test hook: used instead of the output of 'uname -m'

Release assets come from $GITHUB/$REPO/releases.
The installer never uses sudo; pick a directory you can write to.
EOF
}

die() {
  printf '%s install: error: %s\n' "$NAME" "$*" >&2
  exit 1
}

usage_error() {
  printf '%s install: error: %s (see --help)\n' "$NAME" "$*" >&2
  exit 2
}

say() {
  printf '%s\n' "$*"
}

# --- temporary files: removed on every exit path ---------------------------------------------------

tmp_dir=""
staged=""

cleanup() {
  if [ -n "$staged" ]; then rm -f "$staged"; fi
  if [ -n "$tmp_dir" ]; then rm -rf "$tmp_dir"; fi
}

trap cleanup EXIT
# An 'exit' inside a signal trap runs the EXIT trap too, so cleanup happens exactly once.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# --- arguments -------------------------------------------------------------------------------------

version="${REPL_MCP_VERSION:-}"
install_dir="${REPL_MCP_INSTALL_DIR:-}"
base_url="${REPL_MCP_BASE_URL:-}"

need_value() {
  # $1: option name, $2: number of remaining arguments
  if [ "$2" -lt 2 ]; then usage_error "$1 needs a value"; fi
}

while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --version)
      need_value "$1" $#
      version="$2"
      shift 2
      ;;
    --version=*)
      version="${1#*=}"
      shift
      ;;
    --dir)
      need_value "$1" $#
      install_dir="$2"
      shift 2
      ;;
    --dir=*)
      install_dir="${1#*=}"
      shift
      ;;
    --base-url)
      need_value "$1" $#
      base_url="$2"
      shift 2
      ;;
    --base-url=*)
      base_url="${1#*=}"
      shift
      ;;
    *)
      usage_error "unknown argument: $1"
      ;;
  esac
done

# --- platform --------------------------------------------------------------------------------------

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

# A shell running under Rosetta 2 reports x86_64 on Apple silicon; install the native build instead.
if [ "$os" = darwin ] && [ "$arch" = x64 ]; then
  if [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || true)" = 1 ]; then
    arch=arm64
    say "Rosetta 2 detected: installing the native arm64 build."
  fi
fi

asset="$NAME-$os-$arch.tar.gz"

# --- where from, where to --------------------------------------------------------------------------

if [ -n "$base_url" ]; then
  base_url="${base_url%/}"
elif [ -z "$version" ] || [ "$version" = latest ]; then
  base_url="$GITHUB/$REPO/releases/latest/download"
else
  case "$version" in
    *[!A-Za-z0-9.+-]*) usage_error "invalid version: $version" ;;
  esac
  base_url="$GITHUB/$REPO/releases/download/v${version#v}"
fi

if [ -z "$install_dir" ]; then
  if [ -z "${HOME:-}" ]; then die "HOME is not set; choose a directory with --dir"; fi
  install_dir="$HOME/.local/bin"
fi

# --- tools -----------------------------------------------------------------------------------------

have() {
  command -v "$1" >/dev/null 2>&1
}

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

# shell_quote STRING: STRING as one shell word (single-quoted only when needed).
shell_quote() {
  case "$1" in
    *[!A-Za-z0-9_./:=@%+,-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
    *) printf '%s' "$1" ;;
  esac
}

# json_string STRING: STRING as a double-quoted JSON/TOML string.
json_string() {
  printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"
}

# --- download and verify ---------------------------------------------------------------------------

tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/$NAME-install.XXXXXX") || die "cannot create a temporary directory"

say "Downloading $asset from $base_url"
download "$base_url/SHA256SUMS" "$tmp_dir/SHA256SUMS"

# Lines look like "<hex>  <file>" (or "<hex> *<file>" in binary mode).
expected=$(awk -v f="$asset" '$2 == f || $2 == "*" f { print tolower($1) }' "$tmp_dir/SHA256SUMS")
case "$expected" in
  "") die "SHA256SUMS has no checksum for $asset; refusing to install" ;;
  *[!0-9a-f]*) die "SHA256SUMS has a malformed or duplicate entry for $asset; refusing to install" ;;
esac
if [ "${#expected}" -ne 64 ]; then die "SHA256SUMS has a malformed entry for $asset; refusing to install"; fi

download "$base_url/$asset" "$tmp_dir/$asset"
actual=$(sha256_of "$tmp_dir/$asset")
if [ "$actual" != "$expected" ]; then
  die "checksum mismatch for $asset (expected $expected, got $actual); nothing was installed"
fi

mkdir "$tmp_dir/unpacked"
if ! tar -xzf "$tmp_dir/$asset" -C "$tmp_dir/unpacked" "$NAME" 2>/dev/null; then
  die "could not extract $NAME from $asset"
fi
if [ ! -f "$tmp_dir/unpacked/$NAME" ]; then die "$asset does not contain a $NAME binary"; fi

# --- install atomically ----------------------------------------------------------------------------

mkdir -p "$install_dir" 2>/dev/null || die "cannot create install directory $install_dir"
install_dir=$(CDPATH='' cd -- "$install_dir" && pwd) || die "cannot enter install directory $install_dir"
target="$install_dir/$NAME"
if [ -d "$target" ]; then die "$target is a directory; remove it or choose another --dir"; fi

# Stage the new binary next to the old one, so the final rename is atomic: anyone running or reading
# the installed path sees either the old file or the complete new one, never a partial write.
staged=$(mktemp "$install_dir/.$NAME.install.XXXXXX" 2>/dev/null) || die "cannot write to $install_dir"
cp "$tmp_dir/unpacked/$NAME" "$staged" || die "cannot write to $install_dir"
chmod 755 "$staged" || die "cannot make $staged executable"

# Make sure the new binary runs here before it replaces anything.
if ! "$staged" --version >/dev/null 2>&1; then
  die "the downloaded $NAME does not run here ($os-$arch, from $install_dir); nothing was installed"
fi

mv -f "$staged" "$target" || die "cannot replace $target"
staged=""

installed_version=$("$target" --version 2>&1) || die "$target --version failed after installing"

# --- report ----------------------------------------------------------------------------------------

cmd_sh=$(shell_quote "$target")
cmd_json=$(json_string "$target")

cat <<EOF

Installed $target
  repl-mcp --version: $installed_version

Add it to your MCP client:

  Claude Code:
    claude mcp add $NAME -- $cmd_sh

  Codex (~/.codex/config.toml):
    [mcp_servers.$NAME]
    command = $cmd_json
    args = ["--transport", "stdio"]

  Other clients (mcpServers JSON):
    {
      "mcpServers": {
        "$NAME": {
          "command": $cmd_json,
          "args": ["--transport", "stdio"]
        }
      }
    }
EOF

case ":${PATH:-}:" in
  *":$install_dir:"*) ;;
  *)
    cat <<EOF

Note: $install_dir is not on your PATH. MCP clients only need the absolute path above; to run
$NAME from a shell, add this line to your shell profile (~/.profile, ~/.bashrc or ~/.zshrc):
  export PATH="$install_dir:\$PATH"
EOF
    ;;
esac
