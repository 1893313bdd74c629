# Sourced by the scripts: `configure DIR ARGS...` configures DIR with CMake
# for Ninja, which schedules compiles across targets (make would hold a
# target's files until the targets it links are built). A build folder
# configured for another generator is made afresh.
configure() {
  local dir=$1
  shift
  if [ -f "$dir/CMakeCache.txt" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$dir/CMakeCache.txt"; then
    rm -rf "$dir"
  fi
  cmake -G Ninja -S . -B "$dir" "$@" >/dev/null
}
