#!/bin/sh
# The Claude Code plugin's MCP server: runs the repl-mcp release of the plugin's own version.
#
# The first start downloads this machine's release asset and SHA256SUMS (from the GitHub release, or
# REPL_MCP_BASE_URL/<asset>), checks the SHA-256 and installs the binary atomically into
# ${XDG_CACHE_HOME:-~/.cache}/repl-mcp/bin/<version>/. Every start then execs that binary with this
# script's arguments, so no shell stays between the client and the server, and later starts touch no
# network. stdout belongs to MCP: this script writes only to stderr, one line when it fails (exit 1,
# nothing left installed). `launch.sh --help` installs on first use and prints the server's help, which
# prewarms the cache for clients that give a server little time to start.
set -eu

# The plugin version and the release it runs are one number (tests/release/plugin.test.ts checks it).
VERSION="0.1.0"

die() {
  printf 'repl-mcp launcher: error: %s\n' "$*" >&2
  exit 1
}

note() {
  printf 'repl-mcp launcher: %s\n' "$*" >&2
}

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd) || die "cannot find the plugin's scripts directory"
. "$here/fetch-release.sh"

if [ -n "${XDG_CACHE_HOME:-}" ]; then
  cache="$XDG_CACHE_HOME"
elif [ -n "${HOME:-}" ]; then
  cache="$HOME/.cache"
else
  die "neither XDG_CACHE_HOME nor HOME is set; the launcher needs one to keep the binary"
fi
bin_dir="$cache/$NAME/bin/$VERSION"

if [ ! -x "$bin_dir/$NAME" ]; then
  release_traps
  release_platform
  release_tools
  base_url="${REPL_MCP_BASE_URL:-}"
  if [ -n "$base_url" ]; then
    base_url="${base_url%/}"
  else
    base_url=$(release_base_url "$VERSION")
  fi
  release_fetch "$base_url"
  release_install "$unpacked" "$bin_dir"
  release_untrap
fi

exec "$bin_dir/$NAME" "$@"
