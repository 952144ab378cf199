# nspawn.sh: sourced by check-systemd and check-deb. The cached Debian 12 root (debootstrap,
# once, in $NSPAWN_CACHE) and a booted copy of it under systemd-nspawn. The caller sets CACHE
# (absolute), MIRROR, and calls nspawn_root, then nspawn_boot DIR; in_ct runs a command in the
# container's namespaces, as_worker as its user `worker`; nspawn_stop powers it off.

# The cached root: debootstrap into a temporary folder, renamed only when complete, holding
# what the installed packages need at run time (NSPAWN_PKGS: kvferryd's libraries, libncurses6
# for kvferryctl's live views, python3 for python3-kvferry). A root cached before a package
# joined the list gets it once.
NSPAWN_PKGS=(systemd systemd-sysv dbus libuv1 libucx0 libyaml-0-2 libjansson4 libsodium23
             libmicrohttpd12 libnuma1 libncurses6 procps python3)
nspawn_root() {
  local base=$CACHE/bookworm
  if [ ! -x "$base/usr/lib/systemd/systemd" ]; then
    echo "$NSPAWN_WHO: building the Debian 12 root in $base (once)"
    rm -rf "$base.tmp"
    mkdir -p "$CACHE"
    debootstrap --variant=minbase --include="$(IFS=,; echo "${NSPAWN_PKGS[*]}")" \
      bookworm "$base.tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
      { tail -20 "$CACHE/debootstrap.log" >&2; return 1; }
    mv "$base.tmp" "$base"
  fi
  local missing=() p
  for p in "${NSPAWN_PKGS[@]}"; do
    chroot "$base" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
      missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "$NSPAWN_WHO: adding ${missing[*]} to the cached root (once)"
    chroot "$base" sh -c "apt-get update -q && apt-get install -y -q --no-install-recommends ${missing[*]}" \
      >"$CACHE/add.log" 2>&1 || { tail -20 "$CACHE/add.log" >&2; return 1; }
    chroot "$base" apt-get clean
  fi
}

nspawn_pid= nspawn_leader=
# nspawn_boot DIR: boots DIR (--private-network: the container sees only its own loopback;
# --capability: nspawn keeps CAP_IPC_LOCK out of a container by default, and the unit hands it
# to kvferryd), waits for its systemd to settle and prints the state it reached.
nspawn_boot() {
  local dir=$1 machine=kvf-check-$$
  systemd-nspawn --quiet --boot --register=no --keep-unit --private-network --capability=CAP_IPC_LOCK \
    --machine="$machine" --directory="$dir" >"$CACHE/console.log" 2>&1 &
  nspawn_pid=$!
  # The container's PID 1 is nspawn's child; commands run in its namespaces.
  nspawn_leader=
  for _ in $(seq 1 200); do
    nspawn_leader=$(pgrep -P "$nspawn_pid" -x systemd || true)
    [ -n "$nspawn_leader" ] && break
    kill -0 "$nspawn_pid" 2>/dev/null || { cat "$CACHE/console.log" >&2; return 1; }
    sleep 0.1
  done
  [ -n "$nspawn_leader" ] || { echo "$NSPAWN_WHO: the container did not boot" >&2; return 1; }
  for _ in $(seq 1 300); do in_ct test -S /run/systemd/private && break; sleep 0.1; done
  local state
  state=$(in_ct timeout 60 systemctl is-system-running --wait 2>/dev/null || true)
  echo "$NSPAWN_WHO: systemd $(in_ct systemctl --version | head -1 | cut -d' ' -f2) booted ($state)"
}

in_ct() { nsenter --target "$nspawn_leader" --all --wd env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
as_worker() { in_ct setpriv --reuid=worker --regid=worker --init-groups env HOME=/home/worker "$@"; }

# worker_moves N: a worker as the ordinary user `worker` (group kvferry) moves N requests
# through the container's kvferryd: the context side registers and sends, the generation side
# receives and checks every byte (kvferry-sim, instances ctx0 and gen0). Prints both sides'
# output on failure.
worker_moves() {
  local n=$1 spec="kimi-linear-48b:tp=2,blocks=40,slots=2" sim=/usr/lib/kvferry/kvferry-sim
  local sock=/run/kvferry/worker.sock cpid rc=0
  as_worker "$sim" --role context --instance ctx0 --spec "$spec" --all-ranks --socket $sock \
    --requests "$n" --prompt-tokens 2048 --readers 2 >"$CACHE/ctx.out" 2>&1 &
  cpid=$!
  as_worker "$sim" --role generation --instance gen0 --spec "$spec" --all-ranks --socket $sock \
    --requests "$n" --prompt-tokens 2048 --ctx-instance ctx0 >"$CACHE/gen.out" 2>&1 || rc=1
  wait $cpid || rc=1
  [ $rc -eq 0 ] || cat "$CACHE/ctx.out" "$CACHE/gen.out"
  return $rc
}

nspawn_stop() {
  if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
    kill -TERM "$nspawn_pid" 2>/dev/null || true # nspawn asks the container's systemd to power off
    for _ in $(seq 1 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$nspawn_pid" 2>/dev/null || true
  fi
}
