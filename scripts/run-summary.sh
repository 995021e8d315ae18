# Sourced by the scripts that compare runs of `paramctl run`: builds the
# binaries a run needs, makes a scratch folder $out (removed on exit), and
# reads figures back.
#
#   field FILE KEY   a number from a `paramctl run --summary FILE` JSON
#   median N...      the median of the numbers (the lower middle for an
#                    even count)
bazel build --noshow_progress //tools:paramctl //server:paramd-server \
  //worker:paramd-worker
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
field() {
  sed -n "s/^  \"$2\": \\([0-9.]*\\),\$/\\1/p" "$1"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
