# Sourced by scripts/chaos.sh and scripts/soak.sh: a krdmad with softrnic on 127.0.0.1 on a private device path, and
# every process group the script starts killed on exit, whatever happens.
#   private_krdmad NAME BUILD_DIR   sets dir, device, kpid, krdmad, rdmactl, rping; KRDMA_DEVICE for the consumers
#   groups+=("$pid")                a process group (started with setsid) to kill on exit
#   free_port LOW COUNT             a TCP port in [LOW, LOW + COUNT) that no socket uses, in any state
#   port_listens PORT               waits up to 10 s for a listener on PORT (status 1 if none came)
groups=()
private_krdmad() {
  local name=$1 build=$2
  krdmad=$build/kal/krdmad
  rdmactl=$build/tools/rdmactl/rdmactl
  rping=$build/tools/it_rping/it_rping
  local f
  for f in "$krdmad" "$rdmactl" "$rping"; do
    [[ -x $f ]] || { echo "$name: $f is missing: build first (cmake --build build)" >&2; exit 2; }
  done
  dir=$(mktemp -d "/tmp/krdma-$name-XXXXXX")
  device=$dir/krdma
  trap private_krdmad_cleanup EXIT
  trap 'exit 130' INT TERM
  cat > "$dir/krdmad.json" <<JSON
{"device": "$device", "provider_dir": "$build/providers", "modules": ["softrnic_kvp.so"],
 "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"}], "log_level": "warn"}
JSON
  setsid "$krdmad" --config "$dir/krdmad.json" > "$dir/krdmad.out" 2> "$dir/krdmad.err" &
  kpid=$!
  groups+=("$kpid")
  local _
  for _ in $(seq 100); do grep -q "ready on" "$dir/krdmad.out" 2>/dev/null && break; sleep 0.05; done
  grep -q "ready on" "$dir/krdmad.out" || { echo "$name: krdmad did not start:"; cat "$dir/krdmad.err"; exit 1; }
  export KRDMA_DEVICE=$device
  unset OPENRDMA_EMBEDDED_CONFIG
}
private_krdmad_cleanup() {
  local g
  for g in "${groups[@]}"; do kill -9 -- "-$g" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$dir"
}
free_port() {
  local p _
  for _ in $(seq 50); do
    p=$(( $1 + RANDOM % $2 ))
    ss -Htan "sport = :$p" | grep -q . || { echo "$p"; return 0; }
  done
  echo "no free port in $1..$(( $1 + $2 - 1 ))" >&2
  return 1
}
port_listens() {
  local _
  for _ in $(seq 200); do ss -Htln "sport = :$1" | grep -q . && return 0; sleep 0.05; done
  return 1
}
