# shellcheck shell=bash
# host_userland_runtime SCRATCH: sets STORE and RUNTIME. With RUNTIME_STORE
# set, that store and RUNTIME (default python-3.11-ml); without, a stand-in
# runtime made from this host's own userland (its /usr, /etc and /opt bound
# read-only, no copy, into a tree under SCRATCH, recorded as runtime
# `host-userland`), enough to show the GPU path through a runtime's tree on
# a machine that cannot download one. The caller unmounts what lies under
# SCRATCH. Sets PYTHON to python3 when a real store is used.
host_userland_runtime() {
  local scratch="$1" tree d l
  STORE="${RUNTIME_STORE:-}"
  RUNTIME="${RUNTIME:-python-3.11-ml}"
  if [ -n "$STORE" ]; then
    PYTHON=python3
    return
  fi
  STORE="$scratch/runtimes"; RUNTIME=host-userland
  tree="$STORE/trees/0000000000000000000000000000000000000000000000000000000000000000"
  mkdir -p "$tree" "$STORE/installed" "$STORE/objects" "$STORE/tmp" "$STORE/cache/uv"
  for d in usr etc opt; do
    [ -d "/$d" ] && mkdir -p "$tree/$d" && mount --bind -o ro "/$d" "$tree/$d"
  done
  for l in bin sbin lib lib64; do [ -L "/$l" ] && cp -P "/$l" "$tree/$l"; done
  cat >"$STORE/installed/host-userland@0.json" <<JSON
{"name":"host-userland","version":"0","description":"this host's /usr, /etc and /opt, bound in (a stand-in)","digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size_bytes":0,"files":0,"installed_at":0,"environment":{"PATH":"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},"cuda":null,"self_check":["true"],"python_packages":[],"debian_packages":[],"extras":[],"inputs_digest":"sha256:stand-in"}
JSON
  PYTHON="${PYTHON:-python3}"
}
