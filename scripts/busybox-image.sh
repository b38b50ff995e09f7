#!/usr/bin/env bash
# Build a tiny local Docker image from the host's static busybox and tag it
# with every TAG given, e.g.:
#
#   scripts/busybox-image.sh hades-test/busybox:1 alpine:latest ubuntu:latest python:3.9-alpine
#
# No registry access is needed: the rootfs is made from /bin/busybox
# (Debian package busybox-static) and loaded with `docker import`.
# Idempotent: tags that already exist are left alone, so a real image that
# happens to be present (e.g. a pulled alpine:latest) is never overwritten,
# and the script is a no-op when every tag exists.
set -euo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 TAG [TAG...]" >&2
    exit 2
fi

LABEL_KEY=org.hades.test-image
LABEL_VAL=busybox-v1

BUSYBOX="${BUSYBOX:-}"
if [ -z "$BUSYBOX" ]; then
    for cand in /bin/busybox /usr/bin/busybox; do
        if [ -x "$cand" ]; then BUSYBOX="$cand"; break; fi
    done
fi

exists() { docker image inspect "$1" >/dev/null 2>&1; }
is_ours() {
    [ "$(docker image inspect --format "{{ index .Config.Labels \"$LABEL_KEY\" }}" "$1" 2>/dev/null || true)" = "$LABEL_VAL" ]
}

missing=()
source_ref=""
for tag in "$@"; do
    if exists "$tag"; then
        if [ -z "$source_ref" ] && is_ours "$tag"; then source_ref="$tag"; fi
    else
        missing+=("$tag")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "busybox-image: all tags present: $*"
    exit 0
fi

if [ -z "$source_ref" ]; then
    # Reuse any image this script built earlier (under another tag) instead of rebuilding.
    source_ref="$(docker images -q --filter "label=$LABEL_KEY=$LABEL_VAL" 2>/dev/null | head -n1 || true)"
fi

if [ -z "$source_ref" ]; then
    if [ -z "$BUSYBOX" ] || ! "$BUSYBOX" --list >/dev/null 2>&1; then
        echo "busybox-image: no usable busybox binary (apt-get install busybox-static)" >&2
        exit 1
    fi
    # The binary is copied into the image, so it must not need host libraries.
    if command -v ldd >/dev/null 2>&1 && ldd "$BUSYBOX" >/dev/null 2>&1; then
        echo "busybox-image: $BUSYBOX is dynamically linked; install busybox-static" >&2
        exit 1
    fi

    umask 022
    rootfs="$(mktemp -d /tmp/hades-busybox-rootfs.XXXXXX)"
    trap 'rm -rf "$rootfs"' EXIT
    chmod 0755 "$rootfs"  # mktemp -d makes it 0700, which would become the image's /

    mkdir -p "$rootfs"/{bin,etc,tmp,shared,root,proc,sys,dev,var/tmp,home,usr/local/bin}
    chmod 1777 "$rootfs/tmp" "$rootfs/var/tmp"
    chmod 0777 "$rootfs/shared"
    chmod 0700 "$rootfs/root"
    install -m 0755 "$BUSYBOX" "$rootfs/bin/busybox"
    # Every applet as a symlink in /bin; /sbin, /usr/bin and /usr/sbin point at
    # /bin so paths like /usr/bin/env and /sbin/ip also resolve.
    for applet in $("$BUSYBOX" --list); do
        [ "$applet" = busybox ] && continue
        ln -sf busybox "$rootfs/bin/$applet"
    done
    ln -s bin "$rootfs/sbin"
    ln -s ../bin "$rootfs/usr/bin"
    ln -s ../bin "$rootfs/usr/sbin"

    cat >"$rootfs/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
    cat >"$rootfs/etc/group" <<'GROUP'
root:x:0:
nogroup:x:65534:
GROUP
    echo 'hosts: files dns' >"$rootfs/etc/nsswitch.conf"

    first="${missing[0]}"
    tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -c . \
        | docker import \
            -c 'CMD ["sh"]' \
            -c 'ENV PATH=/usr/local/bin:/bin' \
            -c 'WORKDIR /' \
            -c "LABEL $LABEL_KEY=$LABEL_VAL" \
            -m "hades test image from $("$BUSYBOX" | head -n1)" \
            - "$first" >/dev/null
    echo "busybox-image: built $first from $BUSYBOX"
    source_ref="$first"
    missing=("${missing[@]:1}")
fi

for tag in "${missing[@]}"; do
    docker tag "$source_ref" "$tag"
    echo "busybox-image: tagged $tag"
done
