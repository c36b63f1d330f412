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

# The download, checksum check and atomic install are shared with the Claude Code plugin's launcher.
# From a checkout this line reads them from the plugin; the release build writes the file itself here.
. "$(dirname -- "$0")/plugin/scripts/fetch-release.sh"

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

note() {
  say "$*"
}

# Temporary files are removed on every exit path.
release_traps

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

# --- where from, where to --------------------------------------------------------------------------

release_platform

if [ -n "$base_url" ]; then
  base_url="${base_url%/}"
else
  if ! release_version_ok "$version"; then usage_error "invalid version: $version"; fi
  base_url=$(release_base_url "$version")
fi

if [ -z "$install_dir" ]; then
  if [ -z "${HOME:-}" ]; then die "HOME is not set; choose a directory with --dir"; fi
  install_dir="$HOME/.local/bin"
fi

release_tools

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

# --- download, verify, install ---------------------------------------------------------------------

say "Downloading $asset from $base_url"
release_fetch "$base_url"
release_install "$unpacked" "$install_dir"

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

# --sandbox (docs/sandbox.md) needs bubblewrap, socat and ripgrep on Linux; say which are missing.
if [ "$(uname -s)" = Linux ]; then
  missing=""
  for tool in bwrap socat rg; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
  done
  if [ -n "$missing" ]; then
    cat <<EOF

Note: to contain cells (repl-mcp --sandbox) this machine also needs:$missing
  Debian, Ubuntu: sudo apt-get install bubblewrap socat ripgrep
  Fedora: sudo dnf install bubblewrap socat ripgrep
EOF
  fi
fi

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
