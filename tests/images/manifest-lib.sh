# Sourced by make-images.sh (to write MANIFEST) and tests/fuse/t_images.sh
# (to compare a mounted image with it): one "entry" line per path of a
# tree, in MANIFEST's format (see its header). Needs python3.

# manifest_tree IMG DIR: the entry lines of image IMG for the tree at DIR
# (manifest.py beside this file: one process for the whole walk).
manifest_tree() {
    python3 "${BASH_SOURCE[0]%/*}/manifest.py" "$1" "$2"
}
