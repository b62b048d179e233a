# Sourced by scripts/test and scripts/demo: installs the Debian packages
# gmtf needs when any is missing (as root, or through sudo).
gmtf_install_deps() {
    local pkgs=(meson ninja-build pkg-config gcc clang clang-format libdivsufsort-dev libcmocka-dev
        libarchive-dev libfuse3-dev libxxhash-dev libjansson-dev fuse3 bzip2 lbzip2 zstd xz-utils squashfs-tools
        squashfuse sqlite3 attr acl bc "$@")
    local missing=()
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "Installing: ${missing[*]}"
    local sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q >/dev/null || { echo "apt-get update failed" >&2; return 1; }
    $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
        { echo "apt-get install failed: ${missing[*]}" >&2; return 1; }
}
