# Sourced by make-images.sh (to write MANIFEST) and tests/fuse/t_images.sh
# (to compare a mounted image with it): one "entry" line per path of a
# tree, in MANIFEST's format (see its header). Needs stat, sha256sum,
# readlink, od, getfattr; LC_ALL=C for the order.

hex() { od -An -v -tx1 | tr -d ' \n'; }

# manifest_tree IMG DIR: the entry lines of image IMG for the tree at DIR.
manifest_tree() {
    local img=$1 dir=$2
    declare -A group=()
    local next=1
    while IFS= read -r -d '' p; do
        local rel=${p#"$dir"}
        [ -n "$rel" ] || rel=/
        case $rel in *[[:space:]]*) echo "manifest: no spaces in names: $rel" >&2; exit 1;; esac
        local ftype perm uid gid size nlink ino maj min mtime
        IFS='|' read -r ftype perm uid gid size nlink ino maj min mtime \
            <<<"$(stat -c '%F|%a|%u|%g|%s|%h|%i|%t|%T|%.9Y' "$p")"
        local line="entry $img $rel"
        case $ftype in
            directory) line+=" dir";;
            "regular file"|"regular empty file") line+=" file";;
            "symbolic link") line+=" symlink";;
            fifo) line+=" fifo";;
            socket) line+=" socket";;
            "character special file") line+=" chr";;
            "block special file") line+=" blk";;
            *) echo "manifest: $p: unexpected type $ftype" >&2; exit 1;;
        esac
        line+=" mode=$(printf %04o "0$perm") uid=$uid gid=$gid mtime=$mtime"
        case $ftype in
            regular*)
                line+=" size=$size sha256=$(sha256sum <"$p" | cut -d' ' -f1) nlink=$nlink"
                if [ "$nlink" -gt 1 ]; then
                    if [ -z "${group[$ino]:-}" ]; then group[$ino]=$next; next=$((next + 1)); fi
                    line+=" inode=${group[$ino]}"
                fi;;
            "symbolic link") line+=" target=$(readlink -n "$p" | hex)";;
            *special*) line+=" rdev=$((16#$maj)):$((16#$min))";;
        esac
        # Extended attributes, sorted by name, values in hex.
        while IFS= read -r x; do
            case $x in ''|'#'*) continue;; esac
            local k=${x%%=*} val=
            [ "$k" != "$x" ] && val=${x#*=}
            val=${val#0x}
            [ "$val" = '""' ] && val=
            line+=" xattr.$k=$val"
        done < <(getfattr -h -d -m - -e hex --absolute-names "$p" 2>/dev/null | sort)
        echo "$line"
    done < <(find "$dir" -print0 | sort -z)
}

