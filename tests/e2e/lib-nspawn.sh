# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034 # nspawn_error and nspawn_label are the caller's to read and set
# tests/e2e/lib-nspawn.sh: the packages and the container that tests/e2e/run-nspawn and
# contrib/bench/restart-under-load share. Sourced, never run. A container boots the host's own
# root, read-only under an overlay whose upper layer is a tmpfs (nothing it installs reaches
# the host), with systemd as PID 1 and one oneshot unit that runs the caller's script and powers
# off. Each function returns 0 or 1 and, on 1, leaves the reason in nspawn_error; the caller
# prints it its own way. nspawn_cleanup undoes everything and is safe to call at any point.

nspawn_error=
nspawn_pid=
nspawn_mounted=()

# nspawn_cleanup: stop the container if it still runs, unmount what was mounted (in reverse).
nspawn_cleanup() {
	if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
		kill -TERM "$nspawn_pid" 2>/dev/null
		sleep 2
		kill -KILL "$nspawn_pid" 2>/dev/null
	fi
	local i
	for ((i = ${#nspawn_mounted[@]} - 1; i >= 0; i--)); do
		umount "${nspawn_mounted[i]}" 2>/dev/null || umount -l "${nspawn_mounted[i]}" 2>/dev/null
	done
	nspawn_mounted=()
}

# nspawn_build_debs TOP DIR LOG [PREFIX...]: the packages from TOP's HEAD (git archive, then
# dpkg-buildpackage -b with the unit tests skipped) in DIR/m0; the .debs land in DIR. PREFIX
# (e.g. nice -n 19) runs the build. The build's output goes to LOG.
nspawn_build_debs() {
	local top=$1 dir=$2 log=$3
	shift 3
	mkdir -p "$dir/m0"
	if ! (git -C "$top" archive HEAD | tar -x -C "$dir/m0" &&
	      cd "$dir/m0" && DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}" \
	      "$@" dpkg-buildpackage -us -uc -b) >"$log" 2>&1; then
		nspawn_error="the packages build"
		return 1
	fi
}

# nspawn_copy_debs FROM TO: libm0-1, libm0-dev, m0 and m0-bus-postgresql from FROM into TO.
nspawn_copy_debs() {
	local p f
	mkdir -p "$2"
	for p in libm0-1 libm0-dev m0 m0-bus-postgresql; do
		f=$(find "$1" -maxdepth 1 -name "${p}_*.deb" | head -n1)
		if [ -z "$f" ]; then
			nspawn_error="no ${p}_*.deb in $1"
			return 1
		fi
		cp "$f" "$2/"
	done
}

# nspawn_prepare SCRATCH ROOT TAG: the overlay of / at ROOT (its tmpfs under SCRATCH/fs, both
# named TAG) and a tmpfs on /run/systemd/nspawn; no device node of the host's in ROOT/dev, and no
# policy-rc.d (a container image's, such as Docker's that answers 101 and starts nothing, would
# keep the maintainer scripts from restarting and stopping instances).
nspawn_prepare() {
	local root=$2 tag=$3 fs=$1/fs
	mkdir -p "$fs"
	if ! mount -t tmpfs -o mode=0755 "$tag" "$fs"; then
		nspawn_error="cannot mount a tmpfs"
		return 1
	fi
	nspawn_mounted+=("$fs")
	mkdir -p "$fs/upper" "$fs/work" "$root"
	if ! mount -t overlay "$tag" -o "lowerdir=/,upperdir=$fs/upper,workdir=$fs/work" "$root"; then
		nspawn_error="cannot mount an overlay of / (overlayfs)"
		return 1
	fi
	nspawn_mounted+=("$root")
	# nspawn populates /dev itself; the host's device nodes must not be in the way.
	find "$root/dev" -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null
	mkdir -p /run/systemd/nspawn
	if ! mount -t tmpfs -o mode=0755 "$tag-nspawn" /run/systemd/nspawn; then
		nspawn_error="cannot mount /run/systemd/nspawn"
		return 1
	fi
	nspawn_mounted+=(/run/systemd/nspawn)
	rm -f "$root/usr/sbin/policy-rc.d"
}

# nspawn_boot_unit ROOT UNIT DESCRIPTION MOUNT COMMAND...: the oneshot UNIT that runs COMMAND at
# boot (its output appended to MOUNT/inside.log) and then powers the container off. Only it
# runs in there: none of the host's own services (they would share its network), and no timer
# (apt-daily would hold dpkg's lock).
nspawn_boot_unit() {
	local root=$1 unit=$2 description=$3 mount=$4
	shift 4
	cat >"$root/etc/systemd/system/$unit" <<EOF
[Unit]
Description=$description
After=multi-user.target

[Service]
Type=oneshot
ExecStart=$*
ExecStopPost=/bin/systemctl --no-block poweroff
StandardOutput=append:$mount/inside.log
StandardError=append:$mount/inside.log
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
EOF
	mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
	ln -sf "../$unit" "$root/etc/systemd/system/multi-user.target.wants/$unit"
	find "$root/etc/systemd/system/multi-user.target.wants" "$root/etc/systemd/system/timers.target.wants" \
		-mindepth 1 -maxdepth 1 ! -name "$unit" ! -name '*.target' -exec rm -f {} + 2>/dev/null
}

# nspawn_boot ROOT OUT MOUNT MACHINE TIMEOUT: boot ROOT with OUT bind-mounted at MOUNT, the
# console in OUT/console.log, and wait until it powers off, at most TIMEOUT seconds (then it is
# stopped, with a line saying so, which starts with nspawn_label). NSPAWN_ARGS (an array, set by
# the caller) adds options.
nspawn_boot() {
	local root=$1 out=$2 mount=$3 machine=$4 timeout_s=$5 waited=0
	# IPAddressDeny= is a BPF program on the unit's cgroup: it needs the unified hierarchy (forced
	# when the host mounts one beside v1) and the bpf() call with CAP_BPF, which nspawn withholds
	# by default. Without them the container still boots and the firewall check becomes a note.
	local args=("--capability=CAP_BPF,CAP_NET_ADMIN" --system-call-filter=bpf ${NSPAWN_ARGS[@]+"${NSPAWN_ARGS[@]}"})
	if [ -z "${SYSTEMD_NSPAWN_UNIFIED_HIERARCHY:-}" ] && grep -q ' cgroup2 ' /proc/self/mounts; then
		export SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1
	fi
	(cd / && exec systemd-nspawn -D "$root" -b --register=no --keep-unit \
		--bind="$out:$mount" --machine="$machine" "${args[@]}" systemd.firstboot=off) \
		</dev/null >"$out/console.log" 2>&1 &
	nspawn_pid=$!
	while kill -0 "$nspawn_pid" 2>/dev/null && [ "$waited" -lt "$timeout_s" ]; do
		sleep 1
		waited=$((waited + 1))
	done
	if kill -0 "$nspawn_pid" 2>/dev/null; then
		echo "${nspawn_label:-$machine}: the container was still running after ${timeout_s}s; stopping it"
		kill -TERM "$nspawn_pid"
		sleep 5
		kill -KILL "$nspawn_pid" 2>/dev/null
	fi
	wait "$nspawn_pid" 2>/dev/null
	nspawn_pid=
}
